"""The HTTP machinery every adapter shares.

The client with retries, the streaming transport under it, SSE and AWS
event-stream decoding, and SigV4 signing.
"""
