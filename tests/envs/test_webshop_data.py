"""Loading real WebShop files (original schema, original cleaning rules) and bad files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import envs
from envs.webshop.data import load_catalog
from skillrl_core.errors import DataFileError

# The real file sits in ../shared next to the repository (see its SOURCE.md).
SHARED = Path(__file__).resolve().parents[2].parent / "shared"
REAL_ATTRIBUTES = SHARED / "webshop-data" / "items_ins_v2_1000.json"
needs_real_file = pytest.mark.skipif(
    not REAL_ATTRIBUTES.is_file(), reason=f"real WebShop file not found at {REAL_ATTRIBUTES}"
)


def raw_product(asin, **changes):
    record = {
        "asin": asin,
        "name": f"Tea Tree Body Scrub {asin}",
        "full_description": "A gentle scrub with tea tree and natural ingredients.",
        "small_description": ["Tea tree oil", "Natural ingredients"],
        "pricing": "$12.99",
        "customization_options": {
            "Scent": [{"value": "Tea Tree/Mint", "image": None}, {"value": " Lavender "}],
            "Size": [{"value": "8 Ounce"}],
        },
        "images": ["https://example.invalid/a.jpg"],
        "category": "beauty",
        "query": " Scrubs & Body Treatments ",
        "product_category": "Beauty & Personal Care › Skin Care › Body › Scrubs & Body Treatments",
        "product_information": {"dropped": True},
        "brand": "Acme",
    }
    record.update(changes)
    return record


@pytest.fixture
def real_folder(tmp_path):
    if not REAL_ATTRIBUTES.is_file():
        pytest.skip(f"real WebShop file not found at {REAL_ATTRIBUTES}")
    attributes = json.loads(REAL_ATTRIBUTES.read_text())
    with_instruction = [a for a, r in attributes.items() if "instruction" in r][:6]
    plain = [a for a, r in attributes.items() if "instruction" not in r][:2]
    products = [raw_product(a) for a in with_instruction + plain]
    products[1]["pricing"] = "$10.99 - $15.99"
    products[2]["pricing"] = None
    products[3]["small_description"] = "Just one bullet"
    products += [
        raw_product("nan"),  # dropped: the original skips 'nan'
        raw_product("B0TOOLONGASIN"),  # dropped: longer than 10 characters
        raw_product(with_instruction[0], name="A duplicate that must be ignored"),
        raw_product("B0NOATTRS0"),  # not in the attribute file: DUMMY_ATTR
    ]
    (tmp_path / "items_shuffle_small.json").write_text(json.dumps(products))
    shutil.copy(REAL_ATTRIBUTES, tmp_path / "items_ins_v2_1000.json")
    return tmp_path, attributes, with_instruction


@needs_real_file
def test_real_attribute_file_with_a_small_items_file(real_folder):
    folder, attributes, with_instruction = real_folder
    catalog = load_catalog(
        folder / "items_shuffle_small.json", folder / "items_ins_v2_1000.json", seed=3
    )
    asins = [p.asin for p in catalog.products]
    assert asins == with_instruction + asins[6:8] + ["B0NOATTRS0"]
    first = catalog.by_asin[with_instruction[0]]
    assert first.title == f"Tea Tree Body Scrub {with_instruction[0]}"  # the first record wins
    assert first.options == {"scent": ["tea tree | mint", "lavender"], "size": ["8 ounce"]}
    assert first.query == "scrubs & body treatments"
    assert first.attributes == attributes[first.asin]["attributes"]
    assert first.instruction_text == attributes[first.asin]["instruction"]
    assert first.instruction_attributes == attributes[first.asin]["instruction_attributes"]
    assert (first.pricing, first.price_tag) == ([12.99], "$12.99")
    ranged = catalog.by_asin[with_instruction[1]]
    assert (ranged.pricing, ranged.price_tag) == ([10.99, 15.99], "$10.99 to $15.99")
    assert 10.99 <= catalog.prices[ranged.asin] <= 15.99
    assert catalog.by_asin[with_instruction[2]].price_tag == "$100.0"
    assert catalog.by_asin[with_instruction[3]].bullet_points == ["Just one bullet"]
    assert catalog.by_asin["B0NOATTRS0"].attributes == ["DUMMY_ATTR"]


@needs_real_file
def test_env_over_a_real_data_folder(real_folder):
    folder, attributes, with_instruction = real_folder
    env = envs.make("webshop", data_dir=folder, products_file="items_shuffle_small.json")
    # Synthetic goals: one per option combination (2 scents x 1 size) of each instructed product.
    assert len(env.world.goals) == 2 * len(with_instruction)
    obs, info = env.reset(options={"split": "test", "goal_index": 0})
    goal = env.goal
    instruction = attributes[goal.asin]["instruction"]
    assert info["instruction"].startswith(f"{instruction} with scent: ")
    assert ", and size: 8 ounce, and price lower than " in info["instruction"]
    _, _, _, _, info = env.step("search[tea tree scrub]")
    assert f"click[{goal.asin.lower()}]" in info["available_actions"]


def test_corrupt_json_names_the_file(tmp_path):
    bad = tmp_path / "items_shuffle_x.json"
    bad.write_text("[{")
    (tmp_path / "items_ins_v2_x.json").write_text("{}")
    with pytest.raises(DataFileError, match="items_shuffle_x.json: not valid JSON"):
        load_catalog(bad, tmp_path / "items_ins_v2_x.json")


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (raw_product("B000000002", name=None) | {"name": None}, None),
        ({k: v for k, v in raw_product("B000000002").items() if k != "name"}, "missing field"),
        (raw_product("B000000002", pricing="$abc"), "cannot read price"),
        (raw_product("B000000002", customization_options={"Size": [{"no": 1}]}), "option group"),
        ("not an object", "must be an object"),
    ],
)
def test_bad_product_record_names_file_and_record(tmp_path, record, message):
    products = tmp_path / "items_shuffle_x.json"
    products.write_text(json.dumps([raw_product("B000000001"), record]))
    attrs = tmp_path / "items_ins_v2_x.json"
    attrs.write_text(json.dumps({"B000000001": {"attributes": ["tea tree"]}}))
    if message is None:  # a null title is tolerated, as upstream
        load_catalog(products, attrs)
        return
    with pytest.raises(DataFileError) as caught:
        load_catalog(products, attrs)
    text = str(caught.value)
    assert "items_shuffle_x.json" in text and "record 1" in text and message in text


def test_mismatched_attribute_file_is_an_error(tmp_path):
    products = tmp_path / "items_shuffle_x.json"
    products.write_text(json.dumps([raw_product("B000000001")]))
    attrs = tmp_path / "items_ins_v2_x.json"
    attrs.write_text(json.dumps({"B0OTHER001": {"attributes": ["x"]}}))
    with pytest.raises(DataFileError, match="do not belong together"):
        load_catalog(products, attrs)
    attrs.write_text(json.dumps({"B000000001": {"attributes": "tea tree"}}))
    with pytest.raises(DataFileError, match="record 'B000000001'"):
        load_catalog(products, attrs)
    attrs.write_text(json.dumps({"B000000001": {"attributes": [], "instruction": "buy it"}}))
    with pytest.raises(DataFileError, match="instruction without instruction_attributes"):
        load_catalog(products, attrs)


def test_data_folder_problems(tmp_path):
    with pytest.raises(DataFileError, match="data folder not found"):
        envs.make("webshop", data_dir=tmp_path / "missing")
    with pytest.raises(DataFileError, match="no file matching items_shuffle"):
        envs.make("webshop", data_dir=tmp_path)
    for name in ("items_shuffle_a.json", "items_shuffle_b.json", "items_ins_v2.json"):
        (tmp_path / name).write_text("[]")
    with pytest.raises(DataFileError, match="set products_file"):
        envs.make("webshop", data_dir=tmp_path)


def test_human_goals_from_items_human_ins(tmp_path):
    products = [raw_product("B000000001"), raw_product("B000000002")]
    (tmp_path / "items_shuffle.json").write_text(json.dumps(products))
    (tmp_path / "items_ins_v2.json").write_text(
        json.dumps({"B000000001": {"attributes": ["tea tree"]}})
    )
    human = {
        "B000000001": [
            {
                "instruction": "i want a tea tree scrub.",
                "instruction_attributes": ["tea tree"],
                "instruction_options": ["lavender"],
            },
            {
                "instruction": "skipped: no attributes",
                "instruction_attributes": [],
                "instruction_options": [],
            },
        ]
    }
    (tmp_path / "items_human_ins.json").write_text(json.dumps(human))
    env = envs.make("webshop", data_dir=tmp_path)  # goals="auto": human file present
    assert len(env.world.goals) == 1
    goal = env.world.goals[0]
    assert goal.goal_options == ["lavender"] and goal.attributes == ["tea tree"]
    # 12.99 -> bound is the larger of two of 20, 30, 40, 50.
    assert goal.price_upper in (30.0, 40.0, 50.0)
    assert goal.instruction_text == (
        f"i want a tea tree scrub, and price lower than {goal.price_upper:.2f} dollars"
    )
