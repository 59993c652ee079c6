"""The Bedrock Converse API: its request builder, its answer and event-stream parsers.

Also the AWS credential chain Bedrock signs its requests with.

Who owns what: `_adapter` builds Converse requests (`BedrockModel`), `_wire`
holds their body's types and `_stream` parses the answers, whole or streamed
in AWS event-stream framing; `_aws` finds the region and the credentials.
The framing decoder and SigV4 signing are shared HTTP machinery, in
`tidemill.llm.http`.
"""
