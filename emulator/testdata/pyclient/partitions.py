"""Microsoft's Python SDK receiving every partition of a hub at once, as its
processor does (EventHubConsumerClient without a partition id), over AMQP
over WebSockets. Run by TestPythonSDKReceivesPartitionsConcurrently:

    python3 partitions.py EVENTHUBS_CONNECTION HUB CA_FILE WSS_ENDPOINT WANT MODE

MODE "batch" receives with receive_batch (on_event_batch), "event" with
receive (on_event). It receives from the start of every partition until
WANT events arrived (or 60 s passed) and prints one JSON line: the number
of events per partition, the seconds it took and any errors.

The synchronous client serves its partitions from one thread in turns, and
receive hands over one event per turn while a turn on a partition with
nothing to read waits for the socket's read timeout (1 s over WebSockets):
with idle partitions, receive gets about one event per idle partition's
second, on the service as on the emulator (Azure/azure-sdk-for-python#27314).
receive_batch hands over all it has each turn.
"""
import json
import sys
import threading
import time

from azure.eventhub import EventHubConsumerClient, TransportType

conn, hub, ca, endpoint, want_text, mode = sys.argv[1:7]
want = int(want_text)
consumer = EventHubConsumerClient.from_connection_string(
    conn, consumer_group="$Default", eventhub_name=hub,
    transport_type=TransportType.AmqpOverWebsocket, custom_endpoint_address=endpoint,
    connection_verify=ca, load_balancing_interval=1)
counts, errors = {}, []
lock = threading.Lock()
done = threading.Event()


def on_events(context, events):
    with lock:
        counts[context.partition_id] = counts.get(context.partition_id, 0) + len(events)
        if sum(counts.values()) >= want:
            done.set()


def on_error(context, err):
    with lock:
        errors.append("%s: %s: %s" % (getattr(context, "partition_id", None), type(err).__name__, err))


if mode == "batch":
    receive = consumer.receive_batch
    kwargs = dict(on_event_batch=on_events)
else:
    receive = consumer.receive
    kwargs = dict(on_event=lambda context, event: on_events(context, [event] if event is not None else []))
start = time.time()
worker = threading.Thread(target=receive, kwargs=dict(
    on_error=on_error, starting_position="-1", max_wait_time=1, **kwargs), daemon=True)
worker.start()
done.wait(60)
elapsed = time.time() - start
consumer.close()
worker.join(10)
with lock:
    print(json.dumps({"counts": counts, "seconds": elapsed, "errors": errors}))
