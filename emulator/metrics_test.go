package emulator

import (
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/ehmirror/ehmirror/emulator/amqp"
)

// TestReceiverRuntimeMetrics: a consumer link that desires
// com.microsoft:enable-receiver-runtime-metric gets the partition's last
// enqueued event in each delivery's delivery-annotations; one that does not
// gets none.
func TestReceiverRuntimeMetrics(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{AcceptAnyToken: true, Hubs: prodHubs()})
	ctx := testContext(t, 20*time.Second)
	p := newProducer(t, srv.ConnectionString(), "prod.test1")
	sendBatch(ctx, t, p, &azeventhubs.EventDataBatchOptions{PartitionID: ptr("2")},
		&azeventhubs.EventData{Body: []byte("a")}, &azeventhubs.EventData{Body: []byte("b")}, &azeventhubs.EventData{Body: []byte("c")})
	last := srv.Events("prod.test1", 2)[2]

	for _, withMetrics := range []bool{true, false} {
		r := dialRaw(t, srv.Addr())
		r.open()
		r.begin(0)
		a := &amqp.Attach{Name: "metrics", Handle: 0, Role: amqp.RoleReceiver,
			Source: &amqp.Source{Address: "prod.test1/ConsumerGroups/$Default/Partitions/2"}, Target: &amqp.Target{}}
		if withMetrics {
			a.DesiredCapabilities = []amqp.Symbol{"com.microsoft:enable-receiver-runtime-metric"}
		}
		reply := r.attachFrame(0, a)
		offered := len(reply.OfferedCapabilities) == 1 && reply.OfferedCapabilities[0] == "com.microsoft:enable-receiver-runtime-metric"
		if reply.Source == nil || offered != withMetrics {
			t.Fatalf("metrics %v: attach reply %+v", withMetrics, reply)
		}
		before := time.Now().Add(-time.Second)
		r.credit(0, 0, 10)
		_, payload := r.rawTransfer()
		var m amqp.Message
		if err := m.Unmarshal(payload); err != nil {
			t.Fatal(err)
		}
		if string(m.Data[0]) != "a" {
			t.Fatalf("body %q", m.Data[0])
		}
		if !withMetrics {
			if m.DeliveryAnnotations != nil {
				t.Fatalf("delivery annotations without the capability: %v", m.DeliveryAnnotations)
			}
			continue
		}
		da := map[amqp.Symbol]any{}
		for _, e := range m.DeliveryAnnotations {
			da[e.Key.(amqp.Symbol)] = e.Value
		}
		retrieved, _ := da["runtime_info_retrieval_time_utc"].(time.Time)
		if da["last_enqueued_sequence_number"] != int64(2) || da["last_enqueued_offset"] != last.Offset ||
			da["last_enqueued_time_utc"] != last.EnqueuedTime || retrieved.Before(before) || retrieved.After(time.Now().Add(time.Second)) {
			t.Fatalf("delivery annotations %v, want the last event seq 2 offset %s enqueued %v", da, last.Offset, last.EnqueuedTime)
		}
	}
}
