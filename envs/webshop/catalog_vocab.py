# ruff: noqa: E501 - a data table reads better with one value per line, however long.
"""Vocabulary of the embedded catalog: product types of WebShop's five categories.

Each type has the search query shoppers type, the Amazon-style category path, the title noun, a
pool of attributes (the phrases instructions ask for), option groups with their values, a price
range, brands and selling points for bullets and descriptions.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ProductType:
    """A kind of product the generator makes many near-duplicate variants of."""

    category: str
    query: str
    path: str
    noun: str
    attributes: tuple[str, ...]
    options: tuple[tuple[str, tuple[str, ...]], ...]
    price: tuple[float, float]
    brands: tuple[str, ...]
    uses: tuple[str, ...]


def _t(category, query, path, noun, attributes, options, price, brands, uses) -> ProductType:  # noqa: ANN001
    return ProductType(
        category,
        query,
        path,
        noun,
        tuple(attributes.split(", ")),
        tuple((name, tuple(values.split(", "))) for name, values in options),
        price,
        tuple(brands.split(", ")),
        tuple(uses.split(", ")),
    )


COLORS_CLOTHES = "black, white, navy blue, heather grey, burgundy, olive green, light pink"
SIZES_CLOTHES = "small, medium, large, x-large, xx-large"
F = "Clothing, Shoes & Jewelry › "
B = "Beauty & Personal Care › "
E = "Electronics › "
H = "Home & Kitchen › Furniture › "
G = "Grocery & Gourmet Food › "

# One type per entry: category, query, category path, title noun, attribute pool, option
# groups, price range, brands, uses (comma-separated lists keep the table readable).
# fmt: off
TYPES: tuple[ProductType, ...] = (
    _t("fashion", "men's dress shirts", F + "Men › Clothing › Shirts › Dress Shirts", "Dress Shirt",
       "long sleeve, slim fit, machine wash, button closure, wrinkle free, cotton spandex, regular fit, short sleeve",
       [("color", COLORS_CLOTHES), ("size", SIZES_CLOTHES)], (18, 45),
       "Van Heusen, Amazon Essentials, COOFANDY, Calvin Klein, Alex Vando",
       "office, weddings, business trips"),
    _t("fashion", "women's yoga pants", F + "Women › Clothing › Active › Leggings", "Yoga Pants",
       "high waist, tummy control, moisture wicking, four way stretch, side pockets, squat proof, quick dry, wide leg",
       [("color", COLORS_CLOTHES), ("size", SIZES_CLOTHES)], (15, 40),
       "BALEAF, CRZ YOGA, Colorfulkoala, IUGA, Dragon Fit",
       "yoga, running, everyday wear"),
    _t("fashion", "men's running shoes", F + "Men › Shoes › Athletic › Running", "Running Shoes",
       "rubber sole, lace up, memory foam, non slip, arch support, mesh upper, lightweight design, wide toe box",
       [("color", "black, white, grey, navy, red"), ("size", "8, 8.5, 9, 9.5, 10, 11, 12")], (30, 90),
       "Skechers, ASICS, New Balance, Under Armour, Brooks",
       "road running, gym workouts, walking"),
    _t("fashion", "women's summer dresses", F + "Women › Clothing › Dresses › Casual", "Maxi Dress",
       "short sleeve, v neck, floral print, elastic waist, hand wash, flowy, button front, sleeveless",
       [("color", "floral blue, floral pink, black, white, green, yellow"), ("size", SIZES_CLOTHES)], (22, 55),
       "PRETTYGARDEN, ZESICA, Dokotoo, GRACE KARIN, BTFBM",
       "beach vacations, parties, weekends"),
    _t("fashion", "women's winter boots", F + "Women › Shoes › Boots › Snow", "Snow Boots",
       "faux fur lining, waterproof, anti slip, rubber sole, mid calf, zipper closure, warm lining, ankle high",
       [("color", "black, brown, grey, khaki, wine red"), ("size", "6, 7, 8, 9, 10")], (35, 95),
       "Columbia, Sorel, DREAM PAIRS, Kamik, SILENTCARE",
       "snow, hiking, cold commutes"),
    _t("fashion", "men's hoodies", F + "Men › Clothing › Fashion Hoodies & Sweatshirts", "Pullover Hoodie",
       "fleece lined, kangaroo pocket, drawstring hood, machine wash, relaxed fit, zip up, polyester cotton, heavyweight",
       [("color", COLORS_CLOTHES), ("size", SIZES_CLOTHES)], (20, 50),
       "Hanes, Champion, Gildan, Carhartt, Russell Athletic",
       "lounging, layering, workouts"),
    _t("fashion", "women's crossbody bags", F + "Women › Handbags & Wallets › Crossbody Bags", "Crossbody Bag",
       "vegan leather, adjustable strap, zipper closure, multiple pockets, rfid blocking, lightweight design, gold hardware, quilted",
       [("color", "black, brown, beige, red, pink, white")], (18, 60),
       "Fossil, Kate Spade, CLUCI, Telena, KKXIU",
       "travel, shopping, daily use"),
    _t("beauty", "face moisturizer", B + "Skin Care › Face › Creams & Moisturizers", "Face Moisturizer",
       "hyaluronic acid, fragrance free, sensitive skin, dry skin, oil free, spf 30, anti aging, non comedogenic",
       [("size", "1.7 ounce, 2.5 ounce, 3.4 ounce")], (9, 48),
       "CeraVe, Neutrogena, Olay, La Roche-Posay, Cetaphil",
       "morning routines, night care, dry climates"),
    _t("beauty", "hair extensions", B + "Hair Care › Hair Extensions, Wigs & Accessories › Extensions", "Hair Extensions",
       "clip in, natural looking, human hair, heat resistant, straight hair, curly hair, long lasting, easy to apply",
       [("color", "natural black, dark brown, light brown, ash blonde, auburn"), ("size", "14 inch, 18 inch, 22 inch")], (15, 85),
       "GOO GOO, Hairro, Full Shine, REECHO, Sunny",
       "parties, weddings, everyday volume"),
    _t("beauty", "matte liquid lipstick", B + "Makeup › Lips › Lipstick", "Liquid Lipstick",
       "long lasting, waterproof, matte finish, cruelty free, vegan, transfer proof, moisturizing, paraben free",
       [("color", "ruby red, nude, rose pink, berry, coral, mauve")], (6, 25),
       "Maybelline, L'Oreal Paris, NYX, Revlon, e.l.f.",
       "date nights, work, everyday makeup"),
    _t("beauty", "natural deodorant", B + "Personal Care › Deodorants & Antiperspirants › Deodorant", "Deodorant",
       "aluminum free, sensitive skin, natural ingredients, baking soda free, long lasting, vegan, travel size, coconut oil",
       [("scent", "bright citrus, lavender, unscented, coconut, eucalyptus"), ("size", "2.65 ounce, 3 ounce, pack of 2")], (7, 28),
       "Native, Schmidt's, Tom's of Maine, Earth Mama, Kopari",
       "gym bags, daily use, sensitive underarms"),
    _t("beauty", "shampoo and conditioner set", B + "Hair Care › Shampoo & Conditioner › Sets", "Shampoo and Conditioner Set",
       "sulfate free, argan oil, color safe, paraben free, dry hair, tea tree, damaged hair, volumizing",
       [("size", "16 fl oz, 32 fl oz")], (12, 45),
       "OGX, Pantene, Maple Holistics, Arvazallia, Pura D'or",
       "daily washing, color treated hair, frizz"),
    _t("beauty", "makeup brush set", B + "Tools & Accessories › Makeup Brushes & Tools › Brush Sets", "Makeup Brush Set",
       "synthetic bristles, cruelty free, travel case, easy to clean, dense bristles, rose gold, soft bristles, foundation brush",
       [("color", "rose gold, black, pink, silver"), ("size", "10 pieces, 14 pieces, 18 pieces")], (8, 35),
       "BS-MALL, Real Techniques, EM COSMETICS, Docolor, MAANGE",
       "foundation, eyeshadow, contouring"),
    _t("electronics", "wireless earbuds", E + "Headphones, Earbuds & Accessories › Earbuds", "Wireless Earbuds",
       "noise cancelling, bluetooth 5.3, water resistant, charging case, long battery life, touch control, built in microphone, deep bass",
       [("color", "black, white, blue, pink")], (20, 130),
       "Soundcore, JLab, TOZO, Skullcandy, Sony",
       "commuting, workouts, calls"),
    _t("electronics", "phone charger", E + "Computers & Accessories › Chargers & Adapters", "USB C Charger",
       "fast charging, usb c, foldable plug, dual port, 20w, 65w, overheat protection, compact design",
       [("color", "white, black"), ("size", "1 pack, 2 pack, 3 pack")], (9, 45),
       "Anker, UGREEN, Belkin, Spigen, Baseus",
       "travel, desks, bedside charging"),
    _t("electronics", "bluetooth speaker", E + "Portable Audio & Video › Portable Bluetooth Speakers", "Bluetooth Speaker",
       "waterproof, portable, 24 hour playtime, stereo pairing, loud sound, built in microphone, shockproof, rgb lights",
       [("color", "black, blue, red, green, grey")], (25, 150),
       "JBL, Bose, Tribit, Soundcore, Ultimate Ears",
       "pool parties, camping, showers"),
    _t("electronics", "hdmi cable", E + "Television & Video › Accessories › Cables › HDMI Cables", "HDMI Cable",
       "4k 60hz, high speed, braided nylon, gold plated, 8k, ethernet support, ultra hd, dolby vision",
       [("size", "3 feet, 6 feet, 10 feet, 15 feet")], (6, 30),
       "Amazon Basics, Highwings, Cable Matters, Belkin, Monoprice",
       "tv, gaming consoles, monitors"),
    _t("electronics", "wireless mouse", E + "Computers & Accessories › Computer Accessories & Peripherals › Mice", "Wireless Mouse",
       "ergonomic design, silent click, rechargeable battery, usb receiver, adjustable dpi, bluetooth, long battery life, vertical",
       [("color", "black, grey, white, pink, blue")], (9, 60),
       "Logitech, Microsoft, TECKNET, Anker, Jelly Comb",
       "office work, laptops, gaming"),
    _t("electronics", "security camera", E + "Camera & Photo › Video Surveillance › Surveillance Cameras", "Security Camera",
       "night vision, motion detection, two way audio, 1080p hd, wifi, weatherproof, cloud storage, pan tilt",
       [("size", "1 camera, 2 cameras, 4 cameras")], (25, 160),
       "Wyze, Blink, Ring, eufy, Arlo",
       "front doors, baby rooms, garages"),
    _t("electronics", "laptop stand", E + "Computers & Accessories › Laptop Accessories › Stands", "Laptop Stand",
       "adjustable height, aluminum alloy, foldable, heat dissipation, non slip, portable, ergonomic design, 360 rotating",
       [("color", "silver, space grey, black")], (15, 60),
       "Nulaxy, Rain Design, Boyata, Soundance, Lamicall",
       "home offices, desks, travel"),
    _t("furniture", "office chair", H + "Home Office Furniture › Home Office Chairs", "Office Chair",
       "lumbar support, adjustable height, mesh back, padded armrests, swivel, high back, reclining, easy assembly",
       [("color", "black, grey, white, blue")], (60, 260),
       "Amazon Basics, HON, Hbada, SIHOO, Flash Furniture",
       "home offices, study rooms, gaming"),
    _t("furniture", "coffee table", H + "Living Room Furniture › Tables › Coffee Tables", "Coffee Table",
       "solid wood, storage shelf, lift top, easy assembly, rustic finish, metal frame, round, mid century",
       [("color", "walnut, black, white, natural oak, grey")], (60, 240),
       "Walker Edison, VASAGLE, Sauder, Yaheetech, Nathan James",
       "living rooms, apartments, dens"),
    _t("furniture", "bookshelf", H + "Home Office Furniture › Bookcases", "Bookshelf",
       "5 tier, easy assembly, solid wood, metal frame, wall mounted, storage cubes, industrial style, ladder",
       [("color", "rustic brown, black, white, espresso")], (40, 200),
       "HOOBRO, Sauder, VASAGLE, Furinno, Bestier",
       "living rooms, offices, kids rooms"),
    _t("furniture", "bed frame", H + "Bedroom Furniture › Beds, Frames & Bases › Beds", "Bed Frame",
       "platform bed, no box spring needed, under bed storage, upholstered headboard, metal slats, easy assembly, noise free, wood slats",
       [("color", "black, grey, white, brown"), ("size", "twin, full, queen, king")], (90, 420),
       "Zinus, Linenspa, HAAGEN, Allewie, DHP",
       "bedrooms, guest rooms, apartments"),
    _t("furniture", "bar stools", H + "Kitchen Furniture › Stools › Barstools", "Bar Stools",
       "set of 2, swivel, adjustable height, back support, faux leather, footrest, counter height, armless",
       [("color", "black, white, grey, brown")], (50, 220),
       "Flash Furniture, Winsome, Yaheetech, Furmax, Christopher Knight Home",
       "kitchen islands, bars, counters"),
    _t("furniture", "shoe rack", "Home & Kitchen › Storage & Organization › Clothing & Closet Storage › Shoe Organizers", "Shoe Rack",
       "4 tier, stackable, bamboo, easy assembly, metal frame, entryway, space saving, water resistant",
       [("color", "natural, black, white, brown")], (18, 80),
       "SONGMICS, Simple Houseware, Seville Classics, ZENITH, Kings Brand",
       "entryways, closets, dorms"),
    _t("furniture", "tv stand", H + "Living Room Furniture › Television Stands & Entertainment Centers", "TV Stand",
       "storage cabinet, cable management, led lights, easy assembly, open shelves, rustic finish, fits 65 inch tv, glass shelves",
       [("color", "black, walnut, white, grey oak")], (70, 300),
       "WAMPAT, Walker Edison, Rolanstar, Sauder, Prepac",
       "living rooms, bedrooms, game rooms"),
    _t("grocery", "dark chocolate", G + "Snacks & Sweets › Chocolate › Candy & Chocolate Bars", "Dark Chocolate Bar",
       "72% cacao, organic, fair trade, gluten free, non gmo, sea salt, low sugar, vegan",
       [("flavor", "sea salt, almond, orange, mint, raspberry"), ("size", "3.5 ounce, pack of 6, pack of 12")], (5, 45),
       "Lindt, Ghirardelli, Alter Eco, Endangered Species, Hu",
       "snacking, baking, gifts"),
    _t("grocery", "ground coffee", G + "Beverages › Coffee, Tea & Cocoa › Coffee › Ground Coffee", "Ground Coffee",
       "medium roast, dark roast, 100% arabica, organic, fair trade, decaf, whole bean, low acid",
       [("size", "12 ounce, 24 ounce, 2 pound")], (8, 40),
       "Peet's, Lavazza, Death Wish, Kicking Horse, Starbucks",
       "drip machines, french press, pour over"),
    _t("grocery", "protein bars", G + "Snacks & Sweets › Bars › Protein Bars", "Protein Bars",
       "high protein, low sugar, gluten free, keto friendly, plant based, non gmo, 20g protein, no artificial sweeteners",
       [("flavor", "chocolate chip, peanut butter, cookies and cream, birthday cake"), ("size", "12 count, 24 count")], (14, 48),
       "Quest, RXBAR, ONE, KIND, Pure Protein",
       "post workout, breakfast on the go, hiking"),
    _t("grocery", "herbal tea", G + "Beverages › Coffee, Tea & Cocoa › Tea › Herbal", "Herbal Tea",
       "caffeine free, organic, non gmo, individually wrapped, loose leaf, kosher, no added sugar, immune support",
       [("flavor", "chamomile, licorice, ginger, hibiscus, lemon balm"), ("size", "20 count, 40 count, 100 count")], (5, 30),
       "Traditional Medicinals, Yogi, Celestial Seasonings, Pukka, Bigelow",
       "bedtime, digestion, afternoons"),
    _t("grocery", "mixed nuts", G + "Snacks & Sweets › Nuts & Seeds › Mixed Nuts", "Mixed Nuts",
       "roasted, unsalted, low sodium, resealable bag, kosher, non gmo, raw, high protein",
       [("size", "1 pound, 2.5 pound, 40 ounce")], (9, 38),
       "Planters, Wonderful, Kirkland Signature, Blue Diamond, Fisher",
       "snacking, parties, trail mix"),
    _t("grocery", "extra virgin olive oil", G + "Pantry Staples › Cooking & Baking › Oils › Olive", "Extra Virgin Olive Oil",
       "cold pressed, first cold press, organic, non gmo, glass bottle, single origin, kosher, high polyphenol",
       [("size", "16.9 fl oz, 25.3 fl oz, 1 liter")], (9, 42),
       "California Olive Ranch, Colavita, Pompeian, Kirkland Signature, Graza",
       "salads, sauteing, dipping bread"),
)
# fmt: on
