package emulator

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/ehmirror/ehmirror/emulator/amqp"
)

// BenchmarkIngest1KiB measures the emulator's ingest rate: one ProducerClient
// sends full (1 MiB) batches of 1 KiB events to one partition. It reports
// MB/s of event bodies. Retention is capped at 64 MiB per partition so the
// benchmark's memory stays bounded.
func BenchmarkIngest1KiB(b *testing.B) { benchIngest(b, false) }

// BenchmarkIngest1KiBTLS is BenchmarkIngest1KiB over amqps.
func BenchmarkIngest1KiBTLS(b *testing.B) { benchIngest(b, true) }

func benchIngest(b *testing.B, useTLS bool) {
	cfg := Config{Hubs: []HubConfig{{Name: "bench", PartitionCount: 4, MaxPartitionBytes: 64 << 20}}}
	var opts *azeventhubs.ProducerClientOptions
	if useTLS {
		cert, certPEM, _, err := SelfSignedCertificate("localhost")
		if err != nil {
			b.Fatal(err)
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(certPEM)
		cfg.TLSListen, cfg.TLSCertificate = "127.0.0.1:0", &cert
		opts = &azeventhubs.ProducerClientOptions{TLSConfig: &tls.Config{RootCAs: roots, ServerName: "localhost"}}
	}
	srv := startServer(b, cfg)
	ctx := context.Background()
	cs := srv.ConnectionString()
	if useTLS {
		_, port, _ := net.SplitHostPort(srv.TLSAddr())
		cs = "Endpoint=sb://localhost:" + port + ";SharedAccessKeyName=" + DefaultKeyName + ";SharedAccessKey=" + DefaultKey
	}
	p, err := azeventhubs.NewProducerClientFromConnectionString(cs, "bench", opts)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close(ctx)
	body := make([]byte, 1024)
	ev := &azeventhubs.EventData{Body: body}
	// Build one full batch up front to learn how many events fit.
	newBatch := func() *azeventhubs.EventDataBatch {
		batch, err := p.NewEventDataBatch(ctx, &azeventhubs.EventDataBatchOptions{PartitionID: ptr("0")})
		if err != nil {
			b.Fatal(err)
		}
		for {
			if err := batch.AddEventData(ev, nil); err != nil {
				return batch
			}
		}
	}
	perBatch := int(newBatch().NumEvents())
	b.SetBytes(int64(perBatch * len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		b.StopTimer()
		batch := newBatch()
		b.StartTimer()
		if err := p.SendEventDataBatch(ctx, batch, nil); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	b.ReportMetric(float64(b.N*perBatch*len(body))/1e6/b.Elapsed().Seconds(), "MB/s-ingest")
	b.ReportMetric(float64(b.N*perBatch*len(body))/1e6/elapsed.Seconds(), "MB/s-with-batching")
	b.ReportMetric(float64(perBatch), "events/batch")
}

// BenchmarkServerIngestRaw measures the emulator alone: a raw AMQP client
// writes pre-encoded full batches (1 MiB of 1 KiB events, in 64 KiB frames)
// with up to 8 deliveries outstanding, so the SDK's own encoding cost is out
// of the picture.
func BenchmarkServerIngestRaw(b *testing.B) {
	srv := startServer(b, Config{AcceptAnyToken: true, Hubs: []HubConfig{{Name: "bench", PartitionCount: 1, MaxPartitionBytes: 64 << 20}}})
	r := dialRaw(b, srv.Addr())
	r.nc.SetDeadline(time.Time{})
	r.open()
	r.attachSender("bench/Partitions/0")

	event, err := (&amqp.Message{Properties: &amqp.Properties{MessageID: "0123456789abcdef"}, Data: [][]byte{make([]byte, 1024)}}).Append(nil)
	if err != nil {
		b.Fatal(err)
	}
	var payload []byte
	events := 0
	for len(payload)+len(event)+8 < DefaultMaxMessageSize-64 {
		payload = amqp.AppendBinary(amqp.AppendDescriptor(payload, amqp.SectionData), event)
		events++
	}
	// Encode the delivery once, with a 4-byte delivery-id (0x70 form) that
	// each iteration patches: the client's cost stays out of the measurement.
	const chunk = 65536 - 128
	const firstID = 1 << 24
	var frames []byte
	for off := 0; off < len(payload); off += chunk {
		end := min(off+chunk, len(payload))
		t := &amqp.Transfer{Handle: 0, More: end < len(payload)}
		if off == 0 {
			t.DeliveryID, t.HasDeliveryID, t.DeliveryTag = firstID, true, []byte{1}
			t.MessageFormat, t.HasMessageFormat = amqp.MessageFormatBatch, true
		}
		if frames, err = amqp.AppendFrame(frames, amqp.FrameTypeAMQP, 0, t, payload[off:end]); err != nil {
			b.Fatal(err)
		}
	}
	// frame header (8), descriptor (3), list32 header (9), handle (1), 0x70
	const idOffset = 8 + 3 + 9 + 1 + 1
	if frames[idOffset-1] != 0x70 || binary.BigEndian.Uint32(frames[idOffset:]) != firstID {
		b.Fatalf("unexpected transfer encoding % x", frames[:32])
	}
	settled := make(chan error, 16)
	go func() {
		for {
			body, err := r.readFrame()
			if err != nil {
				settled <- err
				return
			}
			if len(body) == 0 {
				continue
			}
			v, _, err := amqp.DecodeBody(body)
			if err != nil {
				settled <- err
				return
			}
			if d, ok := v.(*amqp.Disposition); ok {
				if amqp.DeliveryStateCode(d.State) != amqp.CodeAccepted {
					settled <- errors.New("delivery not accepted")
					return
				}
				settled <- nil
			}
		}
	}()
	b.SetBytes(int64(events * 1024))
	b.ReportAllocs()
	b.ResetTimer()
	outstanding := 0
	id := uint32(firstID)
	for b.Loop() {
		if outstanding == 8 {
			if err := <-settled; err != nil {
				b.Fatal(err)
			}
			outstanding--
		}
		binary.BigEndian.PutUint32(frames[idOffset:], id)
		if _, err := r.nc.Write(frames); err != nil {
			b.Fatal(err)
		}
		id++
		outstanding++
	}
	for ; outstanding > 0; outstanding-- {
		if err := <-settled; err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*events*1024)/1e6/b.Elapsed().Seconds(), "MB/s-ingest")
}
