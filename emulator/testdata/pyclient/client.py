"""An independent client for the emulator: Microsoft's Python SDK
(azure-eventhub 5.11 from Debian's python3-azure, on its own pure-Python
AMQP stack, pyamqp) sends and receives through it over AMQP over WebSockets
(subprotocol AMQPWSB10). Run by TestPythonSDK:

    python3 client.py CONNECTION_STRING HUB CA_FILE WSS_ENDPOINT KEYED_PARTITION

Prints one JSON line with what it saw; exits non-zero on an unexpected error.
"""
import json
import sys
import threading

from azure.eventhub import EventData, EventHubConsumerClient, EventHubProducerClient, TransportType

conn, hub, ca, endpoint = sys.argv[1:5]
opts = dict(connection_verify=ca, transport_type=TransportType.AmqpOverWebsocket,
            custom_endpoint_address=endpoint, retry_total=1)
res = {}

producer = EventHubProducerClient.from_connection_string(conn, eventhub_name=hub, **opts)
with producer:
    # $cbs put-token (no reply-to), then $management READs.
    props = producer.get_eventhub_properties()
    res["partition_ids"] = props["partition_ids"]
    res["partition_ids_call"] = producer.get_partition_ids()
    res["empty_before"] = producer.get_partition_properties("1")["is_empty"]

    batch = producer.create_batch(partition_id="1")
    for body in ["py-1", "py-2", "py-3"]:
        ev = EventData(body)
        ev.properties = {"origin": "py"}
        batch.add(ev)
    producer.send_batch(batch)
    keyed = producer.create_batch(partition_key="py-key")
    keyed.add(EventData("py-keyed"))
    producer.send_batch(keyed)
    producer.send_event(EventData("py-single"), partition_id="2")
    res["last_sequence_number"] = producer.get_partition_properties("1")["last_enqueued_sequence_number"]

    # The batch limit comes from the producer link's attach (max-message-size).
    big = producer.create_batch(partition_id="3")
    res["max_batch_bytes"] = big.max_size_in_bytes
    try:
        big.add(EventData(b"x" * (big.max_size_in_bytes + 1)))
        res["oversized"] = "accepted"
    except ValueError as e:
        res["oversized"] = type(e).__name__

# A hub that does not exist, and a key that is wrong.
for name, cs, h in [("missing_hub", conn, "no-such-hub"),
                    ("wrong_key", conn.replace("SharedAccessKey=", "SharedAccessKey=wrong"), hub)]:
    try:
        with EventHubProducerClient.from_connection_string(cs, eventhub_name=h, **opts) as p:
            p.send_event(EventData("never"), partition_id="0")
        res[name] = "sent"
    except Exception as e:  # the SDK's typed errors
        res[name] = type(e).__name__


def receive(partition, done, **kwargs):
    """Receives from partition until done(events so far)."""
    consumer = EventHubConsumerClient.from_connection_string(conn, "$Default", eventhub_name=hub, **opts)
    got = []

    def on_event(ctx, ev):
        if ev is None:
            return
        got.append({"body": ev.body_as_str(), "origin": (ev.properties or {}).get(b"origin", b"").decode(),
                    "sequence_number": ev.sequence_number, "offset": ev.offset,
                    "partition_key": ev.partition_key.decode() if ev.partition_key else None})
        if ctx.last_enqueued_event_properties:
            res["last_enqueued"] = {k: str(v) for k, v in ctx.last_enqueued_event_properties.items()}
        if done(got):
            threading.Thread(target=consumer.close).start()

    timer = threading.Timer(30, consumer.close)
    timer.start()
    with consumer:
        consumer.receive(on_event=on_event, partition_id=partition, max_wait_time=1, **kwargs)
    timer.cancel()
    return got


# From the start, with an owner level (com.microsoft:epoch link property)
# and last-enqueued-event tracking (receiver runtime metrics).
res["received"] = receive("1", lambda got: len(got) >= 3, starting_position="-1", owner_level=1,
                          track_last_enqueued_event_properties=True)
# From a sequence number, inclusive.
res["from_sequence"] = receive("1", lambda got: len(got) >= 2, starting_position=1, starting_position_inclusive=True)
res["keyed"] = receive(sys.argv[5], lambda got: got[-1]["body"] == "py-keyed", starting_position="-1")[-1]
print(json.dumps(res))
