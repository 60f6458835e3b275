"""Load WebShop product and attribute files with the original's cleaning rules.

Mirrors ``web_agent_site/engine/engine.py:load_products`` of princeton-nlp/WebShop: records whose
ASIN is ``"nan"`` or longer than 10 characters are dropped, repeated ASINs keep the first record,
bullet points become a list, ``pricing`` strings (``"$12.99"``, ``"$10.99 - $15.99"``) become one
or two floats (missing: ``[100.0]``), option names and values are lowercased with ``/`` turned
into `` | ``, products without attributes get ``["DUMMY_ATTR"]``, and the query is lowercased.
Prices of products with a range are drawn uniformly from it (seeded here; unseeded upstream).

Departures: reviews are never loaded (upstream commented them out too, so ``Rating`` is always
``N.A.``), and a malformed record raises :class:`DataFileError` naming the file and the record
instead of a bare ``KeyError``.
"""

from __future__ import annotations

import gzip
import json
import random
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from skillrl_core.errors import DataFileError

EMBEDDED_DIR = Path(__file__).resolve().parent / "data"
EMBEDDED_PRODUCTS = EMBEDDED_DIR / "items_shuffle_embedded.json.gz"
EMBEDDED_ATTRIBUTES = EMBEDDED_DIR / "items_ins_v2_embedded.json.gz"
HUMAN_FILE_NAME = "items_human_ins.json"
REQUIRED_PRODUCT_KEYS = (
    "asin",
    "name",
    "full_description",
    "small_description",
    "customization_options",
    "category",
    "query",
    "product_category",
)


@dataclass(frozen=True)
class HumanInstruction:
    """One human-written instruction for a product (``items_human_ins.json``)."""

    instruction: str
    attributes: tuple[str, ...]
    options: tuple[str, ...]


@dataclass
class Product:
    """A cleaned product record (the original's keys in snake case)."""

    asin: str
    title: str
    description: str
    bullet_points: list[str]
    pricing: list[float]
    price_tag: str
    options: dict[str, list[str]]
    attributes: list[str]
    category: str
    query: str
    product_category: str
    name: str
    main_image: str = ""
    instruction_text: str | None = None
    instruction_attributes: list[str] | None = None
    human_instructions: list[HumanInstruction] = field(default_factory=list)


@dataclass
class Catalog:
    """Every product, by ASIN, with the price each sells at."""

    products: list[Product]
    by_asin: dict[str, Product]
    prices: dict[str, float]


def read_json(path: Path) -> Any:
    """Read a (possibly gzip-compressed) JSON file; a bad file raises :class:`DataFileError`."""
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError as error:
        raise DataFileError(f"{path}: file not found") from error
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as error:
        raise DataFileError(f"{path}: not valid JSON ({error})") from error


def parse_pricing(raw: Any, where: str) -> tuple[list[float], str]:
    """Turn a pricing string into ``([low] or [low, high], price tag)`` as the original does."""
    if raw is None or raw == "" or raw == []:
        return [100.0], "$100.0"
    if not isinstance(raw, str):
        raise DataFileError(f"{where}: 'pricing' must be a string like '$12.99', got {raw!r}")
    try:
        values = [float(Decimal(re.sub(r"[^\d.]", "", part))) for part in raw.split("$")[1:]]
    except InvalidOperation as error:
        raise DataFileError(f"{where}: cannot read price {raw!r}") from error
    if not values:
        raise DataFileError(f"{where}: cannot read price {raw!r} (no '$' amount)")
    if len(values) == 1:
        return values, f"${values[0]}"
    return values[:2], f"${values[0]} to ${values[1]}"


def clean_options(raw: Any, where: str) -> dict[str, list[str]]:
    """Lowercase option groups and values; ``/`` in a value becomes `` | ``."""
    if not raw:
        return {}
    if not isinstance(raw, dict):
        raise DataFileError(f"{where}: 'customization_options' must be an object")
    options: dict[str, list[str]] = {}
    for name, contents in raw.items():
        if contents is None:
            continue
        try:
            values = [c["value"].strip().replace("/", " | ").lower() for c in contents]
        except (TypeError, KeyError, AttributeError) as error:
            raise DataFileError(
                f"{where}: option group {name!r} needs a list of {{'value': str}}"
            ) from error
        options[name.lower()] = values
    return options


def _clean_product(raw: Any, where: str, attributes: dict[str, Any]) -> Product | None:
    if not isinstance(raw, dict):
        raise DataFileError(f"{where}: a product record must be an object")
    missing = [key for key in REQUIRED_PRODUCT_KEYS if key not in raw]
    if missing:
        raise DataFileError(f"{where}: missing field(s) {', '.join(missing)}")
    asin = str(raw["asin"])
    if asin == "nan" or len(asin) > 10:
        return None
    bullets = raw["small_description"]
    pricing, price_tag = parse_pricing(raw.get("pricing"), where)
    record = attributes.get(asin, {})
    instruction = record.get("instruction")
    instruction_attributes = record.get("instruction_attributes")
    if instruction is not None and not instruction_attributes:
        raise DataFileError(f"{where}: instruction without instruction_attributes")
    images = raw.get("images") or [""]
    return Product(
        asin=asin,
        title=str(raw["name"]),
        description=str(raw["full_description"] or ""),
        bullet_points=[str(b) for b in bullets] if isinstance(bullets, list) else [str(bullets)],
        pricing=pricing,
        price_tag=price_tag,
        options=clean_options(raw["customization_options"], where),
        attributes=list(record["attributes"]) if "attributes" in record else ["DUMMY_ATTR"],
        category=str(raw["category"]),
        query=str(raw["query"]).lower().strip(),
        product_category=str(raw["product_category"]),
        name=str(raw["name"]),
        main_image=str(images[0]),
        instruction_text=instruction,
        instruction_attributes=list(instruction_attributes) if instruction_attributes else None,
    )


def _check_attributes(data: Any, path: Path) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise DataFileError(f"{path}: expected an object keyed by ASIN, got {type(data).__name__}")
    for asin, record in data.items():
        if not isinstance(record, dict) or not isinstance(record.get("attributes", []), list):
            raise DataFileError(f"{path}: record {asin!r} must be an object with an attribute list")
    return data


def _attach_human(products: list[Product], data: Any, path: Path) -> None:
    if not isinstance(data, dict):
        raise DataFileError(f"{path}: expected an object keyed by ASIN")
    by_asin = {p.asin: p for p in products}
    for asin, entries in data.items():
        if asin not in by_asin:
            continue
        try:
            by_asin[asin].human_instructions = [
                HumanInstruction(
                    instruction=str(e["instruction"]),
                    attributes=tuple(e["instruction_attributes"]),
                    options=tuple(e.get("instruction_options") or ()),
                )
                for e in entries
            ]
        except (TypeError, KeyError) as error:
            raise DataFileError(
                f"{path}: record {asin!r} needs instruction and instruction_attributes"
            ) from error


def draw_prices(products: list[Product], rng: random.Random) -> dict[str, float]:
    """Price each product: its single price, or a uniform draw from its range."""
    prices: dict[str, float] = {}
    for product in products:
        pricing = product.pricing
        prices[product.asin] = pricing[0] if len(pricing) == 1 else rng.uniform(*pricing[:2])
    return prices


def load_catalog(
    products_path: Path,
    attributes_path: Path,
    *,
    human_path: Path | None = None,
    num_products: int | None = None,
    seed: int = 0,
) -> Catalog:
    """Load and clean a product file plus its attribute file (and optional human goals)."""
    raw_products = read_json(products_path)
    if not isinstance(raw_products, list):
        raise DataFileError(f"{products_path}: expected a list of product records")
    attributes = _check_attributes(read_json(attributes_path), attributes_path)
    if num_products is not None:
        raw_products = raw_products[:num_products]
    products: list[Product] = []
    seen: set[str] = set()
    for index, raw in enumerate(raw_products):
        asin = raw.get("asin") if isinstance(raw, dict) else None
        product = _clean_product(
            raw, f"{products_path}: record {index} (asin {asin!r})", attributes
        )
        if product is None or product.asin in seen:
            continue
        seen.add(product.asin)
        products.append(product)
    if not products:
        raise DataFileError(f"{products_path}: no usable product records")
    if attributes and not seen & set(attributes):
        raise DataFileError(
            f"{attributes_path}: none of its ASINs is in {products_path}; the two files do not "
            "belong together"
        )
    if human_path is not None:
        _attach_human(products, read_json(human_path), human_path)
    prices = draw_prices(products, random.Random(seed))
    return Catalog(products=products, by_asin={p.asin: p for p in products}, prices=prices)


def find_data_files(
    data_dir: Path, products_file: str | None, attributes_file: str | None
) -> tuple[Path, Path, Path | None]:
    """Locate the product, attribute and (optional) human-goal files in a WebShop data folder."""
    if not data_dir.is_dir():
        raise DataFileError(f"{data_dir}: data folder not found")

    def pick(name: str | None, pattern: str, field_name: str) -> Path:
        if name is not None:
            return data_dir / name
        found = sorted(data_dir.glob(pattern))
        if not found:
            raise DataFileError(f"{data_dir}: no file matching {pattern}")
        if len(found) > 1:
            names = ", ".join(p.name for p in found)
            raise DataFileError(f"{data_dir}: several {pattern} ({names}); set {field_name}")
        return found[0]

    products = pick(products_file, "items_shuffle*.json", "products_file")
    attributes = pick(attributes_file, "items_ins_v2*.json", "attributes_file")
    human = data_dir / HUMAN_FILE_NAME
    return products, attributes, human if human.is_file() else None
