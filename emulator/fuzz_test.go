package emulator

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/emulator/amqp"
)

// FuzzServeConnection feeds arbitrary bytes, after a valid SASL exchange and
// AMQP header, into a real connection of a running emulator. The emulator
// must end the connection when the client stops sending (no hang) and must
// never crash. The seed corpus holds recorded SDK sessions.
//
//	go test ./emulator -run '^$' -fuzz FuzzServeConnection -fuzztime 10s
func FuzzServeConnection(f *testing.F) {
	open, _ := amqp.AppendFrame(nil, amqp.FrameTypeAMQP, 0, &amqp.Open{ContainerID: "fuzz"}, nil)
	f.Add(open)
	srv := startServer(f, Config{AcceptAnyToken: true, Hubs: []HubConfig{{Name: "hub1", PartitionCount: 2}, {Name: "prod.test1", PartitionCount: 4}}})
	saslHeader := amqp.ProtocolHeader(amqp.ProtocolSASL)
	amqpHeader := amqp.ProtocolHeader(amqp.ProtocolAMQP)
	init, _ := amqp.AppendFrame(nil, amqp.FrameTypeSASL, 0, &amqp.SASLInit{Mechanism: "ANONYMOUS"}, nil)
	prefix := append(append(append([]byte(nil), saslHeader[:]...), init...), amqpHeader[:]...)

	f.Fuzz(func(t *testing.T, data []byte) {
		nc, err := net.Dial("tcp", srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		drained := make(chan error, 1)
		go func() {
			_, err := io.Copy(io.Discard, nc)
			drained <- err
		}()
		nc.Write(prefix)
		nc.Write(data)
		nc.(*net.TCPConn).CloseWrite()
		if err := <-drained; err != nil && !isReset(err) {
			t.Fatalf("the emulator did not end the connection: %v", err)
		}
	})
}

// FuzzDeliveredEvent unpacks a batch payload as the producer path does and
// builds each event as the consumer path delivers it: the result must keep
// every section of the stored message byte for byte and carry the broker
// annotations with the types the SDK checks.
func FuzzDeliveredEvent(f *testing.F) {
	single, _ := (&amqp.Message{Data: [][]byte{[]byte("x")}}).Append(nil)
	f.Add(amqp.AppendBinary(amqp.AppendDescriptor(nil, amqp.SectionData), single))
	metrics, _ := amqp.AppendMap(amqp.AppendDescriptor(nil, amqp.SectionDeliveryAnnotations), amqp.Map{{Key: amqp.Symbol("k"), Value: int64(1)}})
	f.Fuzz(func(t *testing.T, data []byte) {
		msgs, locs, key, err := splitBatch(data, nil, nil)
		if err != nil {
			return
		}
		if loc, k, err := locateAnnotations(data, true); err == nil {
			msgs, locs, key = append(msgs, data), append(locs, loc), k
		}
		for i, m := range msgs {
			r := record{seq: int64(i), offset: 1234, enqueued: 1_700_000_000_000, msg: m, key: key, maStart: locs[i][0], maEnd: locs[i][1]}
			out := appendDelivered(nil, &r, nil)
			checkDelivered(t, m, out, &r)
			checkMetrics(t, m, appendDelivered(nil, &r, metrics), metrics)
		}
	})
}

// checkMetrics checks a delivery with runtime metrics: the stored message's
// sections with exactly one delivery-annotations section, the metrics, in
// the right place.
func checkMetrics(t *testing.T, stored, delivered, metrics []byte) {
	t.Helper()
	var storedCodes, gotCodes []uint64
	var das [][]byte
	amqp.ForEachSection(stored, func(code uint64, _, _ []byte) error {
		if code != amqp.SectionDeliveryAnnotations {
			storedCodes = append(storedCodes, code)
		}
		return nil
	})
	if err := amqp.ForEachSection(delivered, func(code uint64, section, _ []byte) error {
		if code == amqp.SectionDeliveryAnnotations {
			das = append(das, section)
			return nil
		}
		if len(das) == 0 && code > amqp.SectionDeliveryAnnotations {
			t.Fatalf("section 0x%x before the delivery annotations", code)
		}
		gotCodes = append(gotCodes, code)
		return nil
	}); err != nil {
		t.Fatalf("delivery with metrics: %v", err)
	}
	if len(das) != 1 || !bytes.Equal(das[0], metrics) {
		t.Fatalf("delivery annotations %x, want one: %x", das, metrics)
	}
	if len(gotCodes) < len(storedCodes) {
		t.Fatalf("sections %x, stored %x", gotCodes, storedCodes)
	}
}

// checkDelivered compares the sections of the stored and delivered message.
func checkDelivered(t *testing.T, stored, delivered []byte, r *record) {
	t.Helper()
	sections := func(msg []byte) (other [][]byte, annotations []byte) {
		err := amqp.ForEachSection(msg, func(code uint64, section, value []byte) error {
			if code == amqp.SectionMessageAnnotations {
				annotations = value
				return nil
			}
			other = append(other, section)
			return nil
		})
		if err != nil {
			t.Fatalf("sections of %x: %v", msg, err)
		}
		return other, annotations
	}
	want, _ := sections(stored)
	got, ann := sections(delivered)
	if len(got) != len(want) {
		t.Fatalf("delivered %d other sections, stored %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("section %d changed:\n%x\n%x", i, want[i], got[i])
		}
	}
	// Decode only the broker annotations: the producer's own entries are
	// passed through byte for byte, valid or not.
	body, n, err := amqp.NewDecoder(ann).ReadMapHeader()
	if err != nil {
		t.Fatalf("delivered message-annotations: %v", err)
	}
	var m amqp.Map
	for range n {
		k, err := body.Raw()
		if err != nil {
			t.Fatalf("annotation key: %v", err)
		}
		kd := amqp.NewDecoder(k)
		name, kerr := kd.ReadStringBytes()
		if kerr != nil || !isBrokerAnnotation(k, true) {
			if err := body.Skip(); err != nil {
				t.Fatalf("annotation value: %v", err)
			}
			continue
		}
		v, err := body.Value()
		if err != nil {
			t.Fatalf("annotation %s: %v", name, err)
		}
		m = append(m, amqp.MapEntry{Key: amqp.Symbol(name), Value: v})
	}
	if v, _ := m.Get(amqp.Symbol(annotationSequenceNumber)); v != r.seq {
		t.Fatalf("x-opt-sequence-number = %#v", v)
	}
	if v, _ := m.Get(amqp.Symbol(annotationOffset)); v != "1234" {
		t.Fatalf("x-opt-offset = %#v", v)
	}
	if v, _ := m.Get(amqp.Symbol(annotationEnqueuedTime)); v != amqp.Timestamp(r.enqueued) {
		t.Fatalf("x-opt-enqueued-time = %#v", v)
	}
	if r.key != "" {
		if v, _ := m.Get(amqp.Symbol(annotationPartitionKey)); v != r.key {
			t.Fatalf("x-opt-partition-key = %#v", v)
		}
	}
}
