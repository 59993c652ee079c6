"""Samples for the guardrail tests: what each detector must find, and what it must not.

Every value is made up or a published test value (card-network test numbers,
the IBAN registry's examples, AWS's documented example key).
"""

from __future__ import annotations

import random
import string

_rng = random.Random(20240601)


def _token(length: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    while True:
        value = "".join(_rng.choice(alphabet) for _ in range(length))
        if (
            any(c.isupper() for c in value)
            and any(c.islower() for c in value)
            and any(c.isdigit() for c in value)
        ):
            return value


JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkphbmUgRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu\n"
    "KUpRKfFLfRYC9AIKjbJTWit+CqvjWYzvQwECAwEAAQJAIJLixBy2qpFoS4DSmoEm\n"
    "-----END RSA PRIVATE KEY-----"
)
PEM_TRUNCATED = (
    "-----BEGIN PRIVATE KEY-----\n"
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n"
    "MzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu"
)
OPENSSH = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "-----END OPENSSH PRIVATE KEY-----"
)

# category -> values that must be found whole, on their own, as that category.
POSITIVES: dict[str, list[str]] = {
    "email": [
        "ann@example.org",
        "first.last+tag@sub.example.co.uk",
        "x_y-z%1@my-domain.io",
        "JOHN.DOE@EXAMPLE.COM",
        "a@b.cd",
    ],
    "phone": [
        "+1 415 555 0100",
        "+44 20 7946 0958",
        "+49 (0)30 1234567",
        "+14155550100",
        "+33 1 23 45 67 89",
        "+91 98765 43210",
        "+81-3-1234-5678",
        "(415) 555-0100",
        "415-555-0100",
        "415.555.0100",
        "415 555 0100",
        "1-800-555-0199",
        "+1 (415) 555-0100",
    ],
    "credit_card": [
        "4111 1111 1111 1111",
        "4111-1111-1111-1111",
        "4111111111111111",
        "5555 5555 5555 4444",
        "2223 0031 2200 3222",
        "3782 822463 10005",
        "6011 1111 1111 1117",
        "3530 1113 3330 0000",
        "30569309025904",
        "4222222222222",
    ],
    "iban": [
        "DE89 3704 0044 0532 0130 00",
        "DE89370400440532013000",
        "GB82 WEST 1234 5698 7654 32",
        "FR14 2004 1010 0505 0001 3M02 606",
        "NL91ABNA0417164300",
        "CH9300762011623852957",
        "NO9386011117947",
        "BE68539007547034",
        "ES9121000418450200051332",
    ],
    "ssn": ["123-45-6789", "078-05-1120", "536 90 4399", "665-12-3456"],
    "ipv4": ["192.168.1.20", "10.0.0.1", "8.8.8.8", "203.0.113.7", "172.16.254.1"],
    "ipv6": [
        "2001:db8::8a2e:370:7334",
        "fe80::1ff:fe23:4567:890a",
        "2001:0db8:85a3:0000:0000:8a2e:0370:7334",
        "::ffff:192.0.2.128",
        "2001:db8::",
    ],
    "openai_api_key": [
        "sk-" + _token(48),
        "sk-proj-" + _token(64, string.ascii_letters + "0123456789_-"),
    ],
    "anthropic_api_key": [
        "sk-ant-api03-" + _token(93, string.ascii_letters + "0123456789_-") + "AA"
    ],
    "aws_access_key_id": ["AKIAIOSFODNN7EXAMPLE", "ASIAY34FZKBOKMUTVV7A"],
    "github_token": [
        "ghp_" + _token(36),
        "github_pat_11ABCDEFG0" + _token(60, string.ascii_letters + "0123456789_"),
    ],
    "slack_token": [
        "xoxb-123456789012-1234567890123-" + _token(24),
        "xoxp-" + _token(40, string.ascii_letters + "0123456789-"),
    ],
    "google_api_key": ["AIza" + _token(35, string.ascii_letters + "0123456789_-")],
    "bearer_token": [
        "Bearer 8f14e45fceea167a5a36dedd4bea2543",
        "bearer " + _token(40, string.ascii_letters + "0123456789._-"),
    ],
    "jwt": [JWT],
    "private_key": [PEM, PEM_TRUNCATED, OPENSSH],
}

# Text that looks like sensitive data but is not, and must pass untouched.
NEGATIVES: dict[str, list[str]] = {
    "email": [
        "@mention",
        "user@localhost",
        "logo@2x.png",
        "icon@1.5x.jpg",
        "a@b.c",
        "name at example dot com",
        "foo@@bar.com",
        "release v1.2@latest",
    ],
    "phone": [
        "2024-01-15",
        "12:30:45",
        "4155550100",
        "pages 200-300",
        "ISBN 978-3-16-148410-0",
        "ext 555-0100",
        "+5 points",
        "+1.5%",
        "v2.10.1000",
        "1,234,567",
        "100-200-3000",
        "+05:30",
        "range 10.5-11.3",
    ],
    "credit_card": [
        "4111 1111 1111 1112",
        "1234 5678 9012 3456",
        "0000 0000 0000 0000",
        "12345678901234567",
        "1700000000000",
        "Order #4532 01",
        "41 11 11 11 11 11 11 11",
    ],
    "iban": [
        "DE89 3704 0044 0532 0130 01",
        "XX12 3456 7890 1234 5678",
        "ISO 9001:2015",
        "US12 3456 7890 1234",
        "GB82WEST1234569876543",
    ],
    "ssn": [
        "000-12-3456",
        "666-12-3456",
        "912-34-5678",
        "123-00-4567",
        "123-45-0000",
        "123-45-67890",
        "1234-56-789",
    ],
    "ipv4": [
        "1.2.3",
        "1.2.3.4.5",
        "256.1.1.1",
        "127.0.0.1",
        "0.0.0.0",
        "255.255.255.0",
        "v1.2.3.4",
        "192.168.01.1",
        "version 10.0.19045",
    ],
    "ipv6": [
        "00:1A:2B:3C:4D:5E",
        "12:30:45",
        "::1",
        "::",
        "std::vector",
        "a::b",
        "1:2:3:4:5:6:7:8",
        "Foo::Bar",
    ],
    "openai_api_key": [
        "sk-learn-is-a-python-library",
        "task-manager-service-for-teams",
        "sk-" + "a" * 30,
    ],
    "anthropic_api_key": ["sk-ant-" + "x" * 40],
    "aws_access_key_id": ["AKIA" + "A1B2C3D4E5F6G7H", "xAKIAIOSFODNN7EXAMPLE"],
    "github_token": ["ghp_short", "gh_pages", "github_pat_"],
    "slack_token": ["xoxo-hugs-and-kisses", "xoxb-"],
    "google_api_key": ["AIzaShort"],
    "bearer_token": [
        "Bearer YOUR_ACCESS_TOKEN_GOES_HERE",
        "the bearer of bad news",
        "Bearer <token>",
        "Bearer 123",
    ],
    "jwt": ["eyJhbGciOiJIUzI1NiJ9", "eyJ.eyJ.x"],
    "private_key": [
        "-----BEGIN PUBLIC KEY-----\n"
        "MFwwDQYJKoZIhvcNAQEBBQADSwAwSAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf\n"
        "-----END PUBLIC KEY-----",
        "-----BEGIN CERTIFICATE-----\nMIIBszCCAV2gAwIBAgIJAK\n-----END CERTIFICATE-----",
    ],
    "general": [
        "123e4567-e89b-12d3-a456-426614174000",
        "2024-01-15T12:30:45Z",
        "2024-01-15 12:30:45.123",
        "1700000000",
        "Order #100234567",
        "INV-2024-000123",
        "tracking 1Z999AA10123456784",
        "Python 3.11.4",
        "$1,234,567.89",
        "3.14159",
        "2^32 = 4294967296",
        "#ff0000",
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "a94a8fe5ccb19ba61c4c0873d391e987982fbbd3",
        "15.01.2024",
        "01/15/2024",
        "37.7749, -122.4194",
        "https://example.com/docs/api?page=2&limit=50",
        "C:\\Users\\build\\AppData",
        "sha256:9f86d081884c7d659a2feaa0c55ad015",
    ],
}

# Realistic paragraphs without any personal data or credential: the false-positive set.
CLEAN_PARAGRAPHS = [
    "Thanks for reaching out! Your order #100234567 shipped on 2024-03-15 and should arrive "
    "within 3-5 business days. You can track it from the Orders page at any time.",
    "Version 2.3.1 fixes the crash on startup reported in ticket 48213 and improves cold-start "
    "time by 18%. Upgrade with `pip install -U tidemill==2.3.1`.",
    "The build failed at 14:32:07 UTC with exit code 137, which usually means the container ran "
    "out of memory. Raise the limit from 512 MiB to 2 GiB and retry.",
    "Q3 revenue grew 12.4% year over year to $4.2M, while churn fell from 3.1% to 2.7%. The "
    "board meets again on 10/15/2024 to review the 2025 plan.",
    "Use `std::vector<int>` instead of a raw array, and call `reserve(1024)` before the loop so "
    "the buffer is not reallocated 10 times.",
    "The request id 123e4567-e89b-12d3-a456-426614174000 appears in the gateway logs twice, "
    "at 09:15:02 and 09:15:04, both with status 502.",
    "Set `timeout=30` and `max_retries=5`; the client backs off 0.5 s, 1 s, 2 s, 4 s between "
    "attempts, and honours Retry-After when the server sends it.",
    "In the table, rows 120-135 hold the 2023 figures and rows 136-151 the 2024 figures; the "
    "totals in row 152 sum to 1,284,930.",
    "Our office is open Monday to Friday, 9:00 to 17:30, and closed on public holidays. The "
    "support queue is answered in under 4 hours on average.",
    "Commit a94a8fe5 reverts the schema change from v1.8.0; run `make migrate` after pulling, "
    "then restart the worker pool (3 replicas).",
    "The model scored 87.5 on the benchmark, up from 81.2, with a context window of 128k "
    "tokens and a latency of 420 ms at the 95th percentile.",
    "Python 3.11.4, Node 18.17.0 and Go 1.21.3 are installed on the runner image; the image "
    "digest starts with sha256:9f86d081884c7d65.",
    "Bearer authentication is required for every endpoint except /health. Send the header "
    "`Authorization: Bearer <your token>` with each request.",
    "The coordinates 37.7749, -122.4194 point to San Francisco; the delivery radius is 15 km "
    "and the fee is $4.99 below a $35 order total.",
    "Interest accrues at 4.25% per year, compounded monthly; on a balance of 10,000.00 EUR that "
    "is about 433.82 EUR after the first year.",
    "Step 4 of 7: copy the file to C:\\Program Files\\Tidemill\\config.toml and set "
    "`workers = 8`, `queue = 'default'`.",
    "The retina assets are named logo@2x.png and logo@3x.png; keep both next to logo.png so "
    "the browser can pick the right one.",
    "We tested 1,000 random inputs with seeds 0-999; 997 passed, 2 timed out after 60 s and 1 "
    "hit the known bug in the 1.2.3 parser.",
    "The conference runs from 2024-09-17 to 2024-09-19, with the keynote on day 2 at 10:00. "
    "Badges are collected at desk B12.",
    "Redis listens on port 6379 and PostgreSQL on 5432; both bind to the loopback interface "
    "127.0.0.1 in development.",
    "Split the 4096-token document into chunks of 512 with an overlap of 64, which gives 9 "
    "chunks for the embedding model.",
    "The invoice INV-2024-000123 lists 3 items: 2 licences at 499.00 and 1 support plan at "
    "1,200.00, for a total of 2,198.00 before tax.",
    "To roll back, check out tag v4.12.0, run the migration 0042_down, and redeploy; expect "
    "about 90 seconds of read-only mode.",
    "The MAC address 00:1A:2B:3C:4D:5E belongs to the old router; remove it from the allow "
    "list after the swap on Friday.",
    "Our SLA promises 99.9% uptime per month, which allows 43 minutes 49 seconds of downtime; "
    "last month we were down 12 minutes.",
    "Temperatures ranged from -5.5 to 12.3 degrees over the week, with 14.2 mm of rain on "
    "Tuesday and none from Thursday on.",
    "The hash e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 is the "
    "SHA-256 of the empty string, a common sentinel.",
    "Page 3 of the report (sections 2.1-2.4) covers the migration; the appendix lists 27 "
    "tables and 4 views that changed.",
    "The cron schedule `*/15 * * * *` runs the job every 15 minutes; the last run at 11:45 "
    "processed 2,314 events in 3.2 seconds.",
    "Register the webhook at https://example.com/hooks/orders?version=2 and verify the "
    "signature header on every delivery.",
    "A unix timestamp such as 1700000000 is in seconds; in milliseconds it would be "
    "1700000000000, which JavaScript's Date expects.",
    "The flight leaves at 07:45 from gate 23 and lands at 10:20 local time; the layover in "
    "Frankfurt is 1 h 55 min.",
    "Use the sk-learn style API for the estimator: `fit`, `predict` and `score`; the "
    "task-manager service wraps it for batch jobs.",
    "ISBN 978-3-16-148410-0 is the second edition; the first edition sold 12,500 copies "
    "between 2019 and 2021.",
    "Each shard holds 1/16 of the keys, so a cluster of 64 nodes keeps 4 replicas of every "
    "shard across 3 availability zones.",
    "The recipe serves 4: 250 g flour, 2 eggs, 300 ml milk and a pinch of salt; bake at "
    "180 degrees for 25-30 minutes.",
    "Refunds are processed within 5-7 business days to the original payment method; the "
    "reference for this one is RF-88213.",
    "The ticket shows priority P2, component auth-service, and was reopened 3 times between "
    "release 5.4.0 and 5.4.2.",
    "GPU utilisation averaged 78% over 24 h; memory peaked at 71.3 GiB of 80 GiB during the "
    "evaluation pass at step 12000.",
    "Version 10.0.19045 of the OS ships the fix; earlier builds need KB5031356 installed "
    "before the agent can start.",
]

# Realistic paragraphs holding sensitive data, with what must be found in each.
DIRTY_PARAGRAPHS: list[tuple[str, list[str]]] = [
    (
        "Hi, I'm Jane. You can email me at jane.doe@example.com or call +1 415 555 0100 "
        "after 5pm. My order number is 100234567.",
        ["email", "phone"],
    ),
    (
        "Please charge the card 4111 1111 1111 1111 (exp 12/27) and send the receipt to "
        "billing@acme.io.",
        ["credit_card", "email"],
    ),
    (
        "Wire the deposit to IBAN DE89 3704 0044 0532 0130 00, reference INV-2024-000123.",
        ["iban"],
    ),
    (
        "My SSN is 123-45-6789 and my date of birth is 1984-03-02.",
        ["ssn"],
    ),
    (
        "The server at 203.0.113.7 keeps failing; the IPv6 address is 2001:db8::8a2e:370:7334.",
        ["ipv4", "ipv6"],
    ),
    (
        "Here is my config: OPENAI_API_KEY=" + POSITIVES["openai_api_key"][0] + " and the "
        "AWS key AKIAIOSFODNN7EXAMPLE.",
        ["openai_api_key", "aws_access_key_id"],
    ),
    (
        "curl -H 'Authorization: Bearer 8f14e45fceea167a5a36dedd4bea2543' https://api.example.com",
        ["bearer_token"],
    ),
    ("Paste this into ~/.ssh/id_rsa:\n" + PEM + "\nand chmod 600 it.", ["private_key"]),
    (
        "The session token is " + JWT + ". It expires in an hour.",
        ["jwt"],
    ),
    (
        "Call (415) 555-0100 or text 415.555.0199; fax +44 20 7946 0958.",
        ["phone", "phone", "phone"],
    ),
]
