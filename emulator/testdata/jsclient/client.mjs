// An independent client for the emulator: Microsoft's JavaScript SDK
// (@azure/event-hubs, on rhea) sends and receives through it. Run by
// TestJavaScriptSDK: node client.mjs CONNECTION_STRING HUB. Prints one JSON
// line with what it saw; exits non-zero on any error.
import {
  EventHubProducerClient,
  EventHubConsumerClient,
  earliestEventPosition,
} from "@azure/event-hubs";

const [connectionString, hub] = process.argv.slice(2);
const result = {};

const producer = new EventHubProducerClient(connectionString, hub);
try {
  // $cbs put-token, then $management READ of the hub and a partition.
  const props = await producer.getEventHubProperties();
  result.partitionIds = props.partitionIds;
  result.partitionIdsCall = await producer.getPartitionIds();
  const before = await producer.getPartitionProperties("1");
  result.emptyBefore = before.isEmpty;

  const batch = await producer.createBatch({ partitionId: "1" });
  for (const body of ["js-1", "js-2", "js-3"]) {
    if (!batch.tryAdd({ body, properties: { origin: "js" } })) throw new Error("batch full");
  }
  await producer.sendBatch(batch);
  const keyed = await producer.createBatch({ partitionKey: "js-key" });
  keyed.tryAdd({ body: "js-keyed" });
  await producer.sendBatch(keyed);

  const after = await producer.getPartitionProperties("1");
  result.lastSequenceNumber = after.lastEnqueuedSequenceNumber;
} finally {
  await producer.close();
}

const consumer = new EventHubConsumerClient("$Default", connectionString, hub);
try {
  result.received = await new Promise((resolve, reject) => {
    const got = [];
    const timer = setTimeout(() => reject(new Error(`received ${got.length} of 3 events in 30 s`)), 30000);
    const sub = consumer.subscribe(
      "1",
      {
        processEvents: async (events, context) => {
          for (const e of events) {
            got.push({
              body: e.body,
              origin: e.properties?.origin,
              sequenceNumber: e.sequenceNumber,
              offset: e.offset,
            });
          }
          result.lastEnqueued = context.lastEnqueuedEventProperties;
          if (got.length >= 3) {
            clearTimeout(timer);
            await sub.close();
            resolve(got);
          }
        },
        processError: async (err) => {
          clearTimeout(timer);
          await sub.close();
          reject(err);
        },
      },
      { startPosition: earliestEventPosition, trackLastEnqueuedEventProperties: true, maxBatchSize: 10, maxWaitTimeInSeconds: 1 },
    );
  });
} finally {
  await consumer.close();
}
console.log(JSON.stringify(result));
