// Microsoft's JavaScript Event Hubs SDK (@azure/event-hubs on rhea) as an
// independent consumer of cut-over checkpoints: EventHubConsumerClient
// subscribes with BlobCheckpointStore (@azure/eventhubs-checkpointstore-blob),
// starting where the checkpoints say (latest where there is none, the SDK's
// default). Run by TestCutoverProcessorStartsExactly:
//
//	node processor.mjs EVENTHUBS_CONNECTION HUB STORAGE_CONNECTION CONTAINER WANT WATERMARKS_JSON
//
// It receives until WANT events arrived (or 90 s passed), then 3 s more, and
// prints one JSON line: the events' partition, sequence number and Kafka
// provenance, whether docs/cutover.md's filter drops it (the cut-over's
// watermarks), and any errors. It writes no checkpoint.
import { EventHubConsumerClient, latestEventPosition } from "@azure/event-hubs";
import { BlobCheckpointStore } from "@azure/eventhubs-checkpointstore-blob";
import { ContainerClient } from "@azure/storage-blob";

const [connectionString, hub, storage, container, wantText, watermarksText] = process.argv.slice(2);
const want = Number(wantText);
const watermarks = JSON.parse(watermarksText);
// The filter as docs/cutover.md gives it.
const wm = new Map(watermarks.map((w) => [`${w.topic}/${w.partition}`, w.offset]));
function processed(event) {
  const p = event.properties ?? {};
  const mark = wm.get(`${p["kafka.topic"]}/${Number(p["kafka.partition"])}`);
  return mark !== undefined && Number(p["kafka.offset"]) < mark;
}
const store = new BlobCheckpointStore(new ContainerClient(storage, container));
const consumer = new EventHubConsumerClient("$Default", connectionString, hub, store, {
  loadBalancingOptions: { strategy: "greedy", updateIntervalInMs: 1000 },
});
const received = [];
const errors = [];
const subscription = consumer.subscribe(
  {
    processEvents: async (events, context) => {
      for (const e of events) {
        received.push({
          partition: context.partitionId,
          sequenceNumber: e.sequenceNumber,
          topic: e.properties?.["kafka.topic"] ?? null,
          kafkaPartition: e.properties?.["kafka.partition"] === undefined ? null : Number(e.properties["kafka.partition"]),
          kafkaOffset: e.properties?.["kafka.offset"] === undefined ? null : Number(e.properties["kafka.offset"]),
          dropped: processed(e),
        });
      }
    },
    processError: async (err, context) => {
      errors.push(`${context.partitionId}: ${err}`);
    },
  },
  { startPosition: latestEventPosition, maxWaitTimeInSeconds: 1, maxBatchSize: 100 },
);
const deadline = Date.now() + 90_000;
while (received.length < want && Date.now() < deadline) {
  await new Promise((r) => setTimeout(r, 100));
}
await new Promise((r) => setTimeout(r, 3000));
await subscription.close();
await consumer.close();
console.log(JSON.stringify({ received, errors }));
