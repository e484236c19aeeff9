// Microsoft's JavaScript Event Hubs SDK (@azure/event-hubs on rhea) as an
// independent consumer of cut-over checkpoints: EventHubConsumerClient
// subscribes with BlobCheckpointStore (@azure/eventhubs-checkpointstore-blob),
// starting where the checkpoints say (latest where there is none, the SDK's
// default). Run by TestCutoverProcessorStartsExactly:
//
//	node processor.mjs EVENTHUBS_CONNECTION HUB STORAGE_CONNECTION CONTAINER WANT
//
// It receives until WANT events arrived (or 90 s passed), then 3 s more, and
// prints one JSON line: the events' partition, sequence number and Kafka
// provenance, and any errors. It writes no checkpoint.
import { EventHubConsumerClient, latestEventPosition } from "@azure/event-hubs";
import { BlobCheckpointStore } from "@azure/eventhubs-checkpointstore-blob";
import { ContainerClient } from "@azure/storage-blob";

const [connectionString, hub, storage, container, wantText] = process.argv.slice(2);
const want = Number(wantText);
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
