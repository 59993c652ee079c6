"""Refund an order, in euros.

The demo's payment provider: it only says what it would have done.
"""


def main(order_id: str, amount: float) -> str:
    return f"refunded {amount:.2f} EUR on {order_id}"
