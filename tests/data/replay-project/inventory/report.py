# SPDX-License-Identifier: GPL-2.0-only
"""A plain-text stock report."""


def format_cents(cents):
    return f"{cents / 100:.2f}"


def stock_report(inventory, low_water=5):
    lines = [f"{'SKU':<8} {'NAME':<20} {'STOCK':>6} {'VALUE':>10}"]
    for sku in inventory.skus():
        item = inventory.item(sku)
        qty = inventory.stock(sku)
        flag = " LOW" if qty < low_water else ""
        lines.append(f"{sku:<8} {item.name:<20} {qty:>6} "
                     f"{format_cents(item.price_cents * qty):>10}{flag}")
    lines.append(f"TOTAL {format_cents(inventory.value_cents())}")
    return "\n".join(lines)
