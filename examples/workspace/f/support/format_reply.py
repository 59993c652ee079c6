"""Format the reply to a support ticket.

Takes the customer, the ticket's category and the agent's answer.
"""


def main(customer: str, category: str, answer: str) -> dict:
    return {"to": customer, "category": category, "body": answer.strip()}
