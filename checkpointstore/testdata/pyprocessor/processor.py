"""Microsoft's Python Event Hubs SDK (azure-eventhub 5.11 with its Blob
checkpoint store, azure.eventhub.extensions.checkpointstoreblob, from
Debian's python3-azure) as an independent consumer of cut-over checkpoints:
EventHubConsumerClient receives with BlobCheckpointStore, starting where the
checkpoints say (latest where there is none, the SDK's default), over AMQP
over WebSockets. It receives with receive_batch: the synchronous client
serves its partitions from one thread in turns and receive hands over one
event per turn, while a turn on a partition with nothing to read waits for
the socket's 1 s read timeout, so with idle partitions receive gets about
one event per idle partition's second, on the service as on the emulator
(Azure/azure-sdk-for-python#27314; TestPythonSDKReceivesPartitionsConcurrently
in emulator/ measures it). Run by TestCutoverProcessorStartsExactly:

    python3 processor.py EVENTHUBS_CONNECTION HUB CA_FILE WSS_ENDPOINT STORAGE_CONNECTION CONTAINER WANT WATERMARKS_JSON

It receives until WANT events arrived (or 90 s passed), then 3 s more, and
prints one JSON line: the events' partition, sequence number and Kafka
provenance, whether the Python filter of docs/cutover.md drops it (the cut-over's
watermarks), and any errors. It writes no checkpoint.
"""
import json
import sys
import threading
import time

from azure.eventhub import EventHubConsumerClient, TransportType
from azure.eventhub.extensions.checkpointstoreblob import BlobCheckpointStore

conn, hub, ca, endpoint, storage, container, want_text, watermarks_text = sys.argv[1:9]
want = int(want_text)
# The filter as docs/cutover.md describes it.
watermarks = {(w["topic"], w["partition"]): w["offset"] for w in json.loads(watermarks_text)}


def text(v):
    return v.decode() if isinstance(v, bytes) else v


def provenance(event):
    props = {text(k): text(v) for k, v in (event.properties or {}).items()}
    topic, partition, offset = props.get("kafka.topic"), props.get("kafka.partition"), props.get("kafka.offset")
    if topic is None or partition is None or offset is None:
        return None, None, None
    return topic, int(partition), int(offset)


def processed(topic, partition, offset):
    mark = watermarks.get((topic, partition))
    return mark is not None and offset < mark


store = BlobCheckpointStore.from_connection_string(storage, container)
consumer = EventHubConsumerClient.from_connection_string(
    conn, consumer_group="$Default", eventhub_name=hub, checkpoint_store=store,
    transport_type=TransportType.AmqpOverWebsocket, custom_endpoint_address=endpoint,
    connection_verify=ca, load_balancing_interval=1)
received, errors = [], []
lock = threading.Lock()


def on_event_batch(context, events):
    for event in events:
        topic, partition, offset = provenance(event)
        with lock:
            received.append({"partition": context.partition_id, "sequenceNumber": event.sequence_number,
                             "topic": topic, "kafkaPartition": partition, "kafkaOffset": offset,
                             "dropped": topic is not None and processed(topic, partition, offset)})


def on_error(context, err):
    with lock:
        errors.append("%s: %s: %s" % (getattr(context, "partition_id", None), type(err).__name__, err))


worker = threading.Thread(target=consumer.receive_batch, kwargs=dict(
    on_event_batch=on_event_batch, on_error=on_error, max_wait_time=1), daemon=True)
worker.start()
deadline = time.time() + 90
while time.time() < deadline:
    with lock:
        if len(received) >= want:
            break
    time.sleep(0.1)
time.sleep(3)
consumer.close()
worker.join(10)
with lock:
    first = {}
    for r in received:
        first[r["partition"]] = min(first.get(r["partition"], r["sequenceNumber"]), r["sequenceNumber"])
    print("received %d of %d in %.1f s; first sequence number per partition: %s" % (len(received), want, time.time() - deadline + 90, first), file=sys.stderr)
    print(json.dumps({"received": received, "errors": errors}))
