"""Generate the embedded WebShop catalog, deterministically, in WebShop's own file schema.

``python -m envs.webshop.catalog_gen`` rewrites ``envs/webshop/data/`` byte for byte:

- ``items_shuffle_embedded.json.gz``: a list of product records as in ``items_shuffle.json``
  (``asin``, ``name``, ``full_description``, ``small_description``, ``pricing``,
  ``customization_options``, ``images``, ``category``, ``query``, ``product_category``, ...);
- ``items_ins_v2_embedded.json.gz``: ``{asin: {"attributes", "instruction"?,
  "instruction_attributes"?}}`` as in ``items_ins_v2.json``.

Products come in families of three near-duplicates of one product type: a base, a variant with
one attribute swapped, and either a variant missing one option value or one priced ~50 % higher.
Base and attribute variant carry instructions naming the attribute that tells them apart, so an
agent has to read titles, options and prices to score 1.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import random
import sys
from pathlib import Path
from typing import Any

from envs.webshop.catalog_vocab import TYPES, ProductType

DEFAULT_PRODUCTS = 1050
FAMILY = 3
OUT_DIR = Path(__file__).resolve().parent / "data"
_FILLERS = ("Gift Idea", "Classic Design", "New Version", "Premium Quality", "Everyday Essential")
_TEMPLATES = (
    "i am looking for {q} with {a} and {b}",
    "find me {q} with {a}, {b}",
    "i need {a} {q} that is {b}",
    "i want to buy {q} which are {a} and {b}",
)


def make_asin(seed: int, index: int) -> str:
    """Return a 10-character Amazon-like ASIN, unique per (seed, index)."""
    # Base 36 over 8 characters (2.8e12 values): no collision in a 100k catalog, unlike hex.
    value = int.from_bytes(hashlib.sha1(f"{seed}:{index}".encode()).digest()[:8], "big")
    chars = []
    for _ in range(8):
        value, digit = divmod(value, 36)
        chars.append("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"[digit])
    return "B0" + "".join(chars)


def _title_case(phrase: str) -> str:
    return " ".join(w[:1].upper() + w[1:] for w in phrase.split())


def _price(rng: random.Random, low: float, high: float) -> float:
    return round(max(1.0, round(rng.uniform(low, high)) - 0.01), 2)


def _pricing_text(rng: random.Random, price: float) -> str:
    if rng.random() < 0.15:
        return f"${price:.2f} - ${price + rng.choice([2, 3, 5]):.2f}"
    return f"${price:.2f}"


def _options(rng: random.Random, kind: ProductType) -> dict[str, list[str]]:
    options: dict[str, list[str]] = {}
    for name, values in kind.options:
        picked = set(rng.sample(values, min(len(values), rng.randint(3, 5))))
        options[name] = [v for v in values if v in picked]
    return options


def _without_one_value(options: dict[str, list[str]]) -> dict[str, list[str]]:
    first = next(iter(options))
    return {**options, first: options[first][:-1]}


def _texts(kind: ProductType, brand: str, attrs: list[str], rng: random.Random) -> dict[str, Any]:
    filler = rng.choice(_FILLERS)
    title = (
        f"{brand} {_title_case(attrs[0])} {kind.noun} - {_title_case(attrs[1])}, "
        f"{_title_case(attrs[2])}, {filler}"
    )
    use = rng.choice(kind.uses)
    bullets = [f"{_title_case(a)}: designed with {a} for {rng.choice(kind.uses)}." for a in attrs]
    bullets.append(f"Made for {use}: a {kind.noun.lower()} you can count on every day.")
    bullets.append(
        f"What you get: one {kind.noun.lower()} from {brand} and a friendly support team."
    )
    description = (
        f"The {brand} {kind.noun.lower()} is made for {use}. It offers {attrs[0]}, "
        f"{attrs[1]} and {attrs[2]}. Please check the options before you order."
    )
    return {"name": title, "small_description": bullets, "full_description": description}


def _record(
    asin: str,
    kind: ProductType,
    brand: str,
    attrs: list[str],
    options: dict[str, list[str]],
    price: float,
    rng: random.Random,
) -> dict[str, Any]:
    record = {"asin": asin, **_texts(kind, brand, attrs, rng)}
    record.update(
        {
            "pricing": _pricing_text(rng, price),
            "customization_options": {
                name.title(): [{"value": v, "image": None} for v in values]
                for name, values in options.items()
            },
            "images": [f"images/{asin}.jpg"],
            "category": kind.category,
            "query": kind.query,
            "product_category": kind.path,
            "brand": brand,
        }
    )
    return record


def _instruction(kind: ProductType, attrs: list[str], rng: random.Random) -> str:
    return rng.choice(_TEMPLATES).format(q=kind.query, a=attrs[0], b=attrs[1])


def _family(
    kind: ProductType, family: int, seed: int, next_index: int
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    rng = random.Random(f"{seed}:{kind.query}:{family}")
    brand = kind.brands[family % len(kind.brands)]
    base = rng.sample(list(kind.attributes), 4)
    base_attrs, swap = base[:3], base[3]
    variant_attrs = [swap, *base_attrs[1:]]
    price = _price(rng, *kind.price)
    options = _options(rng, kind)
    members = [
        (base_attrs, options, price, True),
        (variant_attrs, options, _price(rng, *kind.price), True),
    ]
    if family % 2 == 0 and kind.options and len(options[next(iter(options))]) > 1:
        members.append((base_attrs, _without_one_value(options), price, False))
    else:
        members.append((base_attrs, options, round(price * 1.5 + 10, 2), False))
    out = []
    for offset, (attrs, opts, member_price, instructed) in enumerate(members):
        asin = make_asin(seed, next_index + offset)
        record = _record(asin, kind, brand, attrs, opts, member_price, rng)
        entry: dict[str, Any] = {"attributes": list(attrs)}
        if instructed:
            entry["instruction"] = _instruction(kind, attrs[:2], rng)
            entry["instruction_attributes"] = list(attrs[:2])
        out.append((record, entry))
    return out


def generate_catalog(
    num_products: int = DEFAULT_PRODUCTS, seed: int = 0
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Products (``items_shuffle`` schema, shuffled) and their attribute file entries."""
    products: list[dict[str, Any]] = []
    attributes: dict[str, dict[str, Any]] = {}
    family = 0
    while len(products) < num_products:
        for kind in TYPES:
            for record, entry in _family(kind, family, seed, len(products)):
                if len(products) == num_products:
                    break
                products.append(record)
                attributes[record["asin"]] = entry
        family += 1
    random.Random(seed).shuffle(products)
    return products, attributes


def _gzip_json(data: Any) -> bytes:
    buffer = io.BytesIO()
    # mtime=0 and no file name: the same data always gives the same bytes.
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0) as handle:
        handle.write(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    return buffer.getvalue()


def write_catalog(out_dir: Path, num_products: int = DEFAULT_PRODUCTS, seed: int = 0) -> list[Path]:
    """Write both files atomically (temp file + rename); returns their paths."""
    products, attributes = generate_catalog(num_products, seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, data in (
        ("items_shuffle_embedded.json.gz", products),
        ("items_ins_v2_embedded.json.gz", attributes),
    ):
        path = out_dir / name
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(_gzip_json(data))
        tmp.replace(path)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> None:
    """Command line: regenerate the embedded catalog (or a bigger one elsewhere)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="output folder")
    parser.add_argument("--products", type=int, default=DEFAULT_PRODUCTS, help="product count")
    parser.add_argument("--seed", type=int, default=0, help="generator seed")
    args = parser.parse_args(argv)
    for path in write_catalog(args.out, args.products, args.seed):
        sys.stdout.write(f"{path}\n")


if __name__ == "__main__":
    main()
