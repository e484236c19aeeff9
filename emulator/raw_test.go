package emulator

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/ehmirror/ehmirror/emulator/amqp"
	"github.com/ehmirror/ehmirror/partitionkey"
)

// rawConn is a minimal AMQP client built on the emulator's own codec, for the
// few checks the SDK cannot provoke (oversized deliveries, hostile bytes,
// heartbeats).
type rawConn struct {
	t  testing.TB
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

// open performs the SASL ANONYMOUS and open exchange.
func (r *rawConn) open() {
	r.t.Helper()
	r.header(amqp.ProtocolSASL)
	if _, ok := r.read().(*amqp.SASLMechanisms); !ok {
		r.t.Fatal("no sasl-mechanisms")
	}
	r.write(amqp.FrameTypeSASL, 0, &amqp.SASLInit{Mechanism: "ANONYMOUS", InitialResponse: []byte("anonymous")}, nil)
	if out, ok := r.read().(*amqp.SASLOutcome); !ok || out.Code != amqp.SASLCodeOK {
		r.t.Fatalf("sasl-outcome: %+v", out)
	}
	r.header(amqp.ProtocolAMQP)
	r.write(amqp.FrameTypeAMQP, 0, &amqp.Open{ContainerID: "raw", MaxFrameSize: 65536}, nil)
	if _, ok := r.read().(*amqp.Open); !ok {
		r.t.Fatal("no open")
	}
}

func (r *rawConn) header(id uint8) {
	r.t.Helper()
	h := amqp.ProtocolHeader(id)
	if _, err := r.nc.Write(h[:]); err != nil {
		r.t.Fatal(err)
	}
	var got [8]byte
	if _, err := io.ReadFull(r.br, got[:]); err != nil || got != h {
		r.t.Fatalf("protocol header: % x, %v", got, err)
	}
}

func (r *rawConn) write(frameType uint8, ch uint16, p amqp.Performative, payload []byte) {
	r.t.Helper()
	b, err := amqp.AppendFrame(nil, frameType, ch, p, payload)
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

// readFrame returns the next frame's body (nil for a heartbeat) or an error.
func (r *rawConn) readFrame() ([]byte, error) {
	var h [8]byte
	if _, err := io.ReadFull(r.br, h[:]); err != nil {
		return nil, err
	}
	fh, err := amqp.ParseFrameHeader(h[:], 1<<20)
	if err != nil {
		return nil, err
	}
	frame := make([]byte, fh.Size-8)
	if _, err := io.ReadFull(r.br, frame); err != nil {
		return nil, err
	}
	return frame[fh.BodyOffset()-8:], nil
}

// read returns the next performative, skipping heartbeats.
func (r *rawConn) read() any {
	r.t.Helper()
	for {
		body, err := r.readFrame()
		if err != nil {
			r.t.Fatalf("read: %v", err)
		}
		if len(body) == 0 {
			continue
		}
		v, _, err := amqp.DecodeBody(body)
		if err != nil {
			r.t.Fatalf("decode: %v", err)
		}
		return v
	}
}

// attachSender begins a session on channel 0 and attaches a sender to
// address; it returns the emulator's attach reply and what follows it.
func (r *rawConn) attachSender(address string) (*amqp.Attach, any) {
	r.t.Helper()
	r.write(amqp.FrameTypeAMQP, 0, &amqp.Begin{NextOutgoingID: 0, IncomingWindow: 5000, OutgoingWindow: 5000}, nil)
	if _, ok := r.read().(*amqp.Begin); !ok {
		r.t.Fatal("no begin")
	}
	zero := uint32(0)
	r.write(amqp.FrameTypeAMQP, 0, &amqp.Attach{Name: "raw-sender", Role: amqp.RoleSender, Source: &amqp.Source{},
		Target: &amqp.Target{Address: address}, InitialDeliveryCount: &zero}, nil)
	a, ok := r.read().(*amqp.Attach)
	if !ok {
		r.t.Fatal("no attach")
	}
	return a, r.read()
}

func TestRawOversizedDeliveryIsRejected(t *testing.T) {
	t.Parallel()
	const limit = 100_000
	srv := startServer(t, Config{AcceptAnyToken: true, Hubs: []HubConfig{{Name: "hub", PartitionCount: 1, MaxMessageSize: limit}}})
	r := dialRaw(t, srv.Addr())
	r.open()
	a, next := r.attachSender("hub")
	if a.MaxMessageSize != limit || a.Target == nil {
		t.Fatalf("attach reply: max-message-size %d, target %+v", a.MaxMessageSize, a.Target)
	}
	if f, ok := next.(*amqp.Flow); !ok || f.LinkCredit == nil || *f.LinkCredit == 0 {
		t.Fatalf("no credit: %+v", next)
	}
	// One message with a 120,000-byte data section, in two frames.
	msg := amqp.AppendBinary(amqp.AppendDescriptor(nil, amqp.SectionData), make([]byte, 120_000))
	half := len(msg) / 2
	r.write(amqp.FrameTypeAMQP, 0, &amqp.Transfer{Handle: 0, DeliveryID: 0, HasDeliveryID: true, DeliveryTag: []byte{1},
		MessageFormat: 0, HasMessageFormat: true, More: true}, msg[:half])
	r.write(amqp.FrameTypeAMQP, 0, &amqp.Transfer{Handle: 0}, msg[half:])
	var disp *amqp.Disposition
	for disp == nil {
		disp, _ = r.read().(*amqp.Disposition)
	}
	e, err := amqp.DecodeRejected(disp.State)
	if err != nil || e == nil || e.Condition != ConditionMessageSizeExceeded || !disp.Settled || disp.First != 0 {
		t.Fatalf("disposition %+v: error %v %v, want rejected with %s", disp, e, err, ConditionMessageSizeExceeded)
	}
	// A delivery within the limit still goes through on the same link.
	small := amqp.AppendBinary(amqp.AppendDescriptor(nil, amqp.SectionData), []byte("ok"))
	r.write(amqp.FrameTypeAMQP, 0, &amqp.Transfer{Handle: 0, DeliveryID: 1, HasDeliveryID: true, DeliveryTag: []byte{2},
		HasMessageFormat: true}, small)
	disp = nil
	for disp == nil {
		disp, _ = r.read().(*amqp.Disposition)
	}
	if amqp.DeliveryStateCode(disp.State) != amqp.CodeAccepted || disp.First != 1 {
		t.Fatalf("second disposition %+v", disp)
	}
	if evs := srv.Events("hub", 0); len(evs) != 1 || string(evs[0].Body) != "ok" {
		t.Fatalf("stored %+v", evs)
	}
	if got := srv.Stats().RejectedSends; got != 1 {
		t.Fatalf("RejectedSends = %d", got)
	}
}

func TestAttachWithoutClaimIsRefused(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{Hubs: prodHubs()})
	r := dialRaw(t, srv.Addr())
	r.open()
	a, next := r.attachSender("prod.test1")
	if a.Target != nil || a.Source != nil {
		t.Fatalf("refusal attach has a terminus: %+v", a)
	}
	d, ok := next.(*amqp.Detach)
	if !ok || !d.Closed || d.Error == nil || d.Error.Condition != "amqp:unauthorized-access" {
		t.Fatalf("want detach with amqp:unauthorized-access, got %+v", next)
	}
}

func TestEmulatorSendsHeartbeats(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{heartbeat: 20 * time.Millisecond})
	r := dialRaw(t, srv.Addr())
	r.open()
	for {
		body, err := r.readFrame()
		if err != nil {
			t.Fatal(err)
		}
		if len(body) == 0 {
			return // an empty frame
		}
	}
}

// TestHostileBytesEndOnlyThatConnection sends malformed input on raw
// connections; each must be closed, and the emulator must keep serving.
func TestHostileBytesEndOnlyThatConnection(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{Hubs: prodHubs()})
	frame := func(size uint32, doff, typ byte, body ...byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, size)
		return append(append(b, doff, typ, 0, 0), body...)
	}
	deep := []byte{}
	for range 100 {
		deep = append(deep, 0x00, 0x53, 0x12) // nested described types
	}
	cases := map[string]struct {
		afterOpen bool
		bytes     []byte
	}{
		"not amqp":             {false, []byte("GET / HTTP/1.1\r\n\r\n")},
		"bad version":          {false, []byte{'A', 'M', 'Q', 'P', 0, 9, 9, 9}},
		"huge frame":           {true, frame(0xffffffff, 2, 0)},
		"frame below header":   {true, frame(4, 2, 0)},
		"bad data offset":      {true, frame(8, 1, 0)},
		"data offset too big":  {true, frame(12, 200, 0, 0, 0, 0, 0)},
		"unknown performative": {true, frame(11, 2, 0, 0x00, 0x53, 0x7f)},
		"deep nesting":         {true, append(frame(uint32(8+len(deep)), 2, 0), deep...)},
		"list count lies":      {true, frame(8+3+9, 2, 0, 0x00, 0x53, 0x11, 0xd0, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff)},
		"array count lies":     {true, frame(8+3+10, 2, 0, 0x00, 0x53, 0x10, 0xf0, 0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, 0x40)},
		"sasl after open":      {true, frame(8, 2, 1)},
		"frame on no session":  {true, frame(8+4, 2, 0, 0x00, 0x53, 0x17, 0x45)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := dialRaw(t, srv.Addr())
			if tc.afterOpen {
				r.open()
			}
			if _, err := r.nc.Write(tc.bytes); err != nil {
				t.Fatal(err)
			}
			// The emulator closes the connection, possibly after an AMQP close.
			for {
				body, err := r.readFrame()
				if err != nil {
					if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err) || errors.Is(err, amqp.ErrMalformed) {
						return
					}
					t.Fatalf("read: %v", err)
				}
				if len(body) == 0 {
					continue
				}
				if v, _, _ := amqp.DecodeBody(body); v != nil {
					if cl, ok := v.(*amqp.Close); ok && cl.Error == nil {
						t.Fatalf("close without an error")
					}
				}
			}
		})
	}
	ctx := testContext(t, 10*time.Second)
	p := newProducer(t, srv.ConnectionString(), "prod.test1")
	sendBatch(ctx, t, p, nil, &azeventhubs.EventData{Body: []byte("still alive")})
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}

// TestRawSingleMessageWithPartitionKey sends a plain (format 0) message with
// a partition key annotation, as other SDKs can, and reads it back with the
// Go SDK.
func TestRawSingleMessageWithPartitionKey(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{AcceptAnyToken: true, Hubs: prodHubs()})
	r := dialRaw(t, srv.Addr())
	r.open()
	r.attachSender("prod.test3")
	msg, err := (&amqp.Message{
		MessageAnnotations: amqp.Map{{Key: amqp.Symbol("x-opt-partition-key"), Value: "tenant-42"}},
		Properties:         &amqp.Properties{MessageID: "single-1"},
		Data:               [][]byte{[]byte("plain message")},
	}).Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	r.write(amqp.FrameTypeAMQP, 0, &amqp.Transfer{Handle: 0, DeliveryID: 0, HasDeliveryID: true, DeliveryTag: []byte{1}, HasMessageFormat: true}, msg)
	var disp *amqp.Disposition
	for disp == nil {
		disp, _ = r.read().(*amqp.Disposition)
	}
	if amqp.DeliveryStateCode(disp.State) != amqp.CodeAccepted {
		t.Fatalf("disposition %+v", disp)
	}
	want := partitionkey.Partition("tenant-42", 4)
	ctx := testContext(t, 10*time.Second)
	c := newConsumer(t, srv.ConnectionString(), "prod.test3", azeventhubs.DefaultConsumerGroup)
	pc := partitionClient(t, c, strconv.Itoa(want), &azeventhubs.PartitionClientOptions{StartPosition: azeventhubs.StartPosition{Earliest: ptr(true)}})
	got := receiveN(ctx, t, pc, 1)[0]
	if string(got.Body) != "plain message" || got.PartitionKey == nil || *got.PartitionKey != "tenant-42" || *got.MessageID != "single-1" {
		t.Fatalf("received %q key %v id %v", got.Body, got.PartitionKey, got.MessageID)
	}
	if stored := srv.Events("prod.test3", want); len(stored) != 1 || !bytes.Equal(stored[0].Message, msg) {
		t.Fatalf("stored message differs from the one sent")
	}
}

// TestFramesAfterEndAreIgnored: a client that detaches links after ending
// their session (the Python SDK does, closing its management links) keeps
// its connection, and so does one that ends a session it never began
// (go-amqp, giving up on a begin, expects no answer); any other frame on a channel that never
// had a session is still an error.
func TestFramesAfterEndAreIgnored(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{Hubs: prodHubs()})
	r := dialRaw(t, srv.Addr())
	r.open()
	begin := &amqp.Begin{NextOutgoingID: 0, IncomingWindow: 5000, OutgoingWindow: 5000}
	r.write(amqp.FrameTypeAMQP, 0, begin, nil)
	if _, ok := r.read().(*amqp.Begin); !ok {
		t.Fatal("no begin")
	}
	r.write(amqp.FrameTypeAMQP, 0, &amqp.End{}, nil)
	if _, ok := r.read().(*amqp.End); !ok {
		t.Fatal("no end")
	}
	r.write(amqp.FrameTypeAMQP, 0, &amqp.Detach{Handle: 3}, nil)
	r.write(amqp.FrameTypeAMQP, 0, begin, nil)
	if got, ok := r.read().(*amqp.Begin); !ok {
		t.Fatalf("after a detach on an ended session: %+v, want the connection kept and a begin", got)
	}
	// An end on a channel that never had a session is ignored: the next
	// begin on it is answered.
	r.write(amqp.FrameTypeAMQP, 9, &amqp.End{}, nil)
	r.write(amqp.FrameTypeAMQP, 9, begin, nil)
	if got, ok := r.read().(*amqp.Begin); !ok {
		t.Fatalf("after an end on a channel without a session: %+v, want the connection kept and a begin", got)
	}
	r.write(amqp.FrameTypeAMQP, 7, &amqp.Detach{Handle: 3}, nil)
	if cl, ok := r.read().(*amqp.Close); !ok || cl.Error == nil || cl.Error.Condition != "amqp:connection:framing-error" {
		t.Fatalf("detach on a channel without a session: %+v, want a framing-error close", cl)
	}
}

// TestRawSmallSessionWindowSharedByReceivers receives four partitions on
// links of one session whose incoming-window is one transfer, as a client
// with a small window does: it grants the next transfer by a session flow
// only after it has the previous one. Every delivery must reach it
// without waiting for anything else (the emulator's heartbeats are off):
// a sender that waits for window must first put on the wire what the
// client has to see before it opens the window again.
func TestRawSmallSessionWindowSharedByReceivers(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{AcceptAnyToken: true, Hubs: prodHubs(), heartbeat: time.Hour})
	const hub, partitions, perPartition = "prod.test4", 4, 20
	ctx := testContext(t, time.Minute)
	p := newProducer(t, srv.ConnectionString(), hub)
	for pid := range partitions {
		var events []*azeventhubs.EventData
		for i := range perPartition {
			events = append(events, &azeventhubs.EventData{Body: []byte("event " + strconv.Itoa(i))})
		}
		sendBatch(ctx, t, p, &azeventhubs.EventDataBatchOptions{PartitionID: ptr(strconv.Itoa(pid))}, events...)
	}

	r := dialRaw(t, srv.Addr())
	r.open()
	r.write(amqp.FrameTypeAMQP, 0, &amqp.Begin{NextOutgoingID: 0, IncomingWindow: 1, OutgoingWindow: 5000}, nil)
	if _, ok := r.read().(*amqp.Begin); !ok {
		t.Fatal("no begin")
	}
	for h := range uint32(partitions) {
		r.write(amqp.FrameTypeAMQP, 0, &amqp.Attach{Name: "raw-receiver-" + strconv.Itoa(int(h)), Handle: h, Role: amqp.RoleReceiver,
			Source: &amqp.Source{Address: hub + "/ConsumerGroups/$Default/Partitions/" + strconv.Itoa(int(h))}, Target: &amqp.Target{}}, nil)
	}
	var nextIn uint32 // transfers received: the session's next-incoming-id
	for h := range uint32(partitions) {
		credit, dc := uint32(perPartition), uint32(0)
		r.write(amqp.FrameTypeAMQP, 0, &amqp.Flow{NextIncomingID: &nextIn, IncomingWindow: 1, OutgoingWindow: 5000,
			Handle: &h, DeliveryCount: &dc, LinkCredit: &credit}, nil)
	}
	got := map[uint32]int{}
	for int(nextIn) < partitions*perPartition {
		r.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		body, err := r.readFrame()
		if err != nil {
			t.Fatalf("after %d transfers (per link %v): %v", nextIn, got, err)
		}
		if len(body) == 0 {
			continue
		}
		v, _, err := amqp.DecodeBody(body)
		if err != nil {
			t.Fatal(err)
		}
		switch f := v.(type) {
		case *amqp.Attach, *amqp.Flow:
		case *amqp.Transfer:
			got[f.Handle]++
			nextIn++
			r.write(amqp.FrameTypeAMQP, 0, &amqp.Flow{NextIncomingID: &nextIn, IncomingWindow: 1, OutgoingWindow: 5000}, nil)
		default:
			t.Fatalf("after %d transfers: %T %+v", nextIn, v, v)
		}
	}
	for h := range uint32(partitions) {
		if got[h] != perPartition {
			t.Fatalf("transfers per link %v, want %d each", got, perPartition)
		}
	}
}

// TestRawReplyWaitsForSessionWindow sends a $management request on a
// session whose client has not opened its incoming-window yet: the reply
// must wait for the window without stopping the connection, and go out on
// the session flow that opens it.
func TestRawReplyWaitsForSessionWindow(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{AcceptAnyToken: true, Hubs: prodHubs(), heartbeat: time.Hour})
	r := dialRaw(t, srv.Addr())
	r.open()
	r.write(amqp.FrameTypeAMQP, 0, &amqp.Begin{NextOutgoingID: 0, IncomingWindow: 0, OutgoingWindow: 5000}, nil)
	if _, ok := r.read().(*amqp.Begin); !ok {
		t.Fatal("no begin")
	}
	zero, credit, reqHandle, replyHandle := uint32(0), uint32(10), uint32(0), uint32(1)
	r.write(amqp.FrameTypeAMQP, 0, &amqp.Attach{Name: "raw-request", Handle: reqHandle, Role: amqp.RoleSender, Source: &amqp.Source{},
		Target: &amqp.Target{Address: "$management"}, InitialDeliveryCount: &zero}, nil)
	r.write(amqp.FrameTypeAMQP, 0, &amqp.Attach{Name: "raw-reply", Handle: replyHandle, Role: amqp.RoleReceiver,
		Source: &amqp.Source{Address: "$management"}, Target: &amqp.Target{Address: "raw-reply-to"}}, nil)
	r.write(amqp.FrameTypeAMQP, 0, &amqp.Flow{NextIncomingID: &zero, IncomingWindow: 0, OutgoingWindow: 5000,
		Handle: &replyHandle, DeliveryCount: &zero, LinkCredit: &credit}, nil)
	req, err := (&amqp.Message{
		Properties: &amqp.Properties{MessageID: "req-1", ReplyTo: "raw-reply-to"},
		ApplicationProperties: amqp.Map{{Key: "operation", Value: "READ"}, {Key: "type", Value: "com.microsoft:eventhub"},
			{Key: "name", Value: "prod.test1"}},
		Value: nil, HasValue: true,
	}).Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	r.write(amqp.FrameTypeAMQP, 0, &amqp.Transfer{Handle: reqHandle, DeliveryID: 0, HasDeliveryID: true, DeliveryTag: []byte{1},
		HasMessageFormat: true, Settled: true}, req)
	window := uint32(10)
	r.write(amqp.FrameTypeAMQP, 0, &amqp.Flow{NextIncomingID: &zero, IncomingWindow: window, OutgoingWindow: 5000}, nil)
	r.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		body, err := r.readFrame()
		if err != nil {
			t.Fatalf("no reply after the session flow: %v", err)
		}
		if len(body) == 0 {
			continue
		}
		v, payload, err := amqp.DecodeBody(body)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := v.(*amqp.Transfer); !ok {
			continue
		}
		var resp amqp.Message
		if err := resp.Unmarshal(payload); err != nil {
			t.Fatal(err)
		}
		if resp.Properties == nil || resp.Properties.CorrelationID != "req-1" || stringProps(resp.ApplicationProperties)["status-description"] != "OK" {
			t.Fatalf("reply %+v %v", resp.Properties, resp.ApplicationProperties)
		}
		return
	}
}

// TestRawShrunkSessionWindowStopsTheSender sends a session flow that
// crossed transfers in flight and shrank the window (next-incoming-id 0,
// incoming-window 1 after five transfers were sent): the client's window
// is then below zero, so nothing more may come until a flow opens it.
func TestRawShrunkSessionWindowStopsTheSender(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{AcceptAnyToken: true, Hubs: prodHubs(), heartbeat: time.Hour})
	ctx := testContext(t, time.Minute)
	var events []*azeventhubs.EventData
	for i := range 20 {
		events = append(events, &azeventhubs.EventData{Body: []byte("event " + strconv.Itoa(i))})
	}
	sendBatch(ctx, t, newProducer(t, srv.ConnectionString(), "prod.test5"), &azeventhubs.EventDataBatchOptions{PartitionID: ptr("0")}, events...)
	r := dialRaw(t, srv.Addr())
	r.open()
	r.write(amqp.FrameTypeAMQP, 0, &amqp.Begin{NextOutgoingID: 0, IncomingWindow: 5, OutgoingWindow: 5000}, nil)
	if _, ok := r.read().(*amqp.Begin); !ok {
		t.Fatal("no begin")
	}
	handle, zero, credit := uint32(0), uint32(0), uint32(20)
	r.write(amqp.FrameTypeAMQP, 0, &amqp.Attach{Name: "raw-receiver", Handle: handle, Role: amqp.RoleReceiver,
		Source: &amqp.Source{Address: "prod.test5/ConsumerGroups/$Default/Partitions/0"}, Target: &amqp.Target{}}, nil)
	r.write(amqp.FrameTypeAMQP, 0, &amqp.Flow{NextIncomingID: &zero, IncomingWindow: 5, OutgoingWindow: 5000,
		Handle: &handle, DeliveryCount: &zero, LinkCredit: &credit}, nil)
	transfers := func(wait time.Duration) int {
		n := 0
		for {
			r.nc.SetReadDeadline(time.Now().Add(wait))
			body, err := r.readFrame()
			if err != nil {
				return n
			}
			if len(body) == 0 {
				continue
			}
			if v, _, _ := amqp.DecodeBody(body); v != nil {
				if _, ok := v.(*amqp.Transfer); ok {
					n++
				}
			}
		}
	}
	if n := transfers(time.Second); n != 5 {
		t.Fatalf("%d transfers in a window of 5", n)
	}
	r.write(amqp.FrameTypeAMQP, 0, &amqp.Flow{NextIncomingID: &zero, IncomingWindow: 1, OutgoingWindow: 5000}, nil)
	if n := transfers(500 * time.Millisecond); n != 0 {
		t.Fatalf("%d transfers after a flow that left the window below zero", n)
	}
	five := uint32(5)
	r.write(amqp.FrameTypeAMQP, 0, &amqp.Flow{NextIncomingID: &five, IncomingWindow: 5, OutgoingWindow: 5000}, nil)
	if n := transfers(time.Second); n != 5 {
		t.Fatalf("%d transfers after the window opened by 5", n)
	}
}
