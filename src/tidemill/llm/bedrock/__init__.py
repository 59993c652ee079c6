"""The Bedrock Converse API: its request builder, its answer and event-stream parsers.

Also the AWS credential chain Bedrock signs its requests with.
"""
