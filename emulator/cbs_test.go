package emulator

import (
	"testing"

	"github.com/ehmirror/ehmirror/emulator/amqp"
)

// begin starts a session on channel ch of a raw connection.
func (r *rawConn) begin(ch uint16) {
	r.t.Helper()
	r.write(amqp.FrameTypeAMQP, ch, &amqp.Begin{NextOutgoingID: 0, IncomingWindow: 5000, OutgoingWindow: 5000}, nil)
	rawNext[*amqp.Begin](r)
}

// attach attaches a link on channel ch and returns the emulator's attach
// reply. A nil source or target is sent as null.
func (r *rawConn) attach(ch uint16, name string, handle uint32, role amqp.Role, source *amqp.Source, target *amqp.Target) *amqp.Attach {
	r.t.Helper()
	a := &amqp.Attach{Name: name, Handle: handle, Role: role, Source: source, Target: target}
	if role == amqp.RoleSender {
		zero := uint32(0)
		a.InitialDeliveryCount = &zero
	}
	return r.attachFrame(ch, a)
}

func (r *rawConn) attachFrame(ch uint16, a *amqp.Attach) *amqp.Attach {
	r.t.Helper()
	r.write(amqp.FrameTypeAMQP, ch, a, nil)
	for {
		switch v := r.read().(type) {
		case *amqp.Attach:
			return v
		case *amqp.Flow:
		default:
			r.t.Fatalf("waiting for attach of %q: got %T %+v", a.Name, v, v)
		}
	}
}

// next returns the next performative of type T, skipping flows and
// dispositions, and the transfer payload for transfers.
func rawNext[T any](r *rawConn) T {
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
		if x, ok := v.(T); ok {
			return x
		}
		switch v.(type) {
		case *amqp.Flow, *amqp.Disposition:
			continue
		}
		var zero T
		r.t.Fatalf("got %T %+v, want %T", v, v, zero)
	}
}

// rawTransfer reads the next transfer and returns its payload.
func (r *rawConn) rawTransfer() (*amqp.Transfer, []byte) {
	r.t.Helper()
	for {
		body, err := r.readFrame()
		if err != nil {
			r.t.Fatalf("read: %v", err)
		}
		if len(body) == 0 {
			continue
		}
		v, payload, err := amqp.DecodeBody(body)
		if err != nil {
			r.t.Fatalf("decode: %v", err)
		}
		switch v := v.(type) {
		case *amqp.Transfer:
			return v, append([]byte(nil), payload...)
		case *amqp.Flow, *amqp.Disposition:
		default:
			r.t.Fatalf("got %T %+v, want a transfer", v, v)
		}
	}
}

// credit grants credit to the emulator's sender on the client's handle.
func (r *rawConn) credit(ch uint16, handle, n uint32) {
	r.t.Helper()
	zero, h := uint32(0), handle
	r.write(amqp.FrameTypeAMQP, ch, &amqp.Flow{NextIncomingID: &zero, IncomingWindow: 5000, OutgoingWindow: 5000,
		Handle: &h, DeliveryCount: &zero, LinkCredit: &n}, nil)
}

// request sends one RPC request message on the client's sender handle.
func (r *rawConn) request(ch uint16, handle, deliveryID uint32, msg *amqp.Message) {
	r.t.Helper()
	b, err := msg.Append(nil)
	if err != nil {
		r.t.Fatal(err)
	}
	r.write(amqp.FrameTypeAMQP, ch, &amqp.Transfer{Handle: handle, DeliveryID: deliveryID, HasDeliveryID: true,
		DeliveryTag: []byte{byte(deliveryID)}, HasMessageFormat: true, Settled: true}, b)
}

// putTokenRequest is a $cbs put-token request.
func putTokenRequest(id, replyTo, tokenType, token, audience string) *amqp.Message {
	return &amqp.Message{
		Properties: &amqp.Properties{MessageID: id, ReplyTo: replyTo},
		ApplicationProperties: amqp.Map{
			{Key: "operation", Value: "put-token"},
			{Key: "type", Value: tokenType},
			{Key: "name", Value: audience},
		},
		Value: token, HasValue: true,
	}
}

// rpcStatus decodes an RPC response's status code and description.
func rpcStatus(t testing.TB, payload []byte) (int64, string, *amqp.Message) {
	t.Helper()
	var m amqp.Message
	if err := m.Unmarshal(payload); err != nil {
		t.Fatalf("response: %v", err)
	}
	var code int64
	var desc string
	for _, e := range m.ApplicationProperties {
		switch e.Key {
		case "status-code":
			code, _ = integer(e.Value)
		case "status-description":
			desc, _ = e.Value.(string)
		}
	}
	return code, desc, &m
}

// TestCBSReplyRoutedByLinkName: a reply receiver attached with an empty
// target gets the response when the request's reply-to names the link.
func TestCBSReplyRoutedByLinkName(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{Hubs: prodHubs()})
	r := dialRaw(t, srv.Addr())
	r.open()
	r.begin(0)
	r.attach(0, "cbs-sender", 0, amqp.RoleSender, &amqp.Source{}, &amqp.Target{Address: "$cbs"})
	reply := r.attach(0, "cbs-reply-7", 1, amqp.RoleReceiver, &amqp.Source{Address: "$cbs"}, nil)
	if reply.Source == nil {
		t.Fatalf("reply link refused: %+v", reply)
	}
	r.credit(0, 1, 10)
	token := sasToken("amqp://"+srv.Addr()+"/prod.test1", DefaultKeyName, DefaultKey, farFuture())
	r.request(0, 0, 0, putTokenRequest("req-1", "cbs-reply-7", "servicebus.windows.net:sastoken", token, "amqp://"+srv.Addr()+"/prod.test1"))
	tr, payload := r.rawTransfer()
	code, desc, m := rpcStatus(t, payload)
	if tr.Handle != reply.Handle || code != 202 || m.Properties == nil || m.Properties.CorrelationID != "req-1" {
		t.Fatalf("response on handle %d (want %d): status %d %q, properties %+v", tr.Handle, reply.Handle, code, desc, m.Properties)
	}
}

// TestSecondCBSSenderIsRefused: one $cbs link pair per connection; another
// $cbs sender on the same connection is refused with amqp:not-allowed, and
// one attached after the first detached is accepted.
func TestSecondCBSSenderIsRefused(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{Hubs: prodHubs()})
	r := dialRaw(t, srv.Addr())
	r.open()
	r.begin(0)
	if a := r.attach(0, "cbs-1", 0, amqp.RoleSender, &amqp.Source{}, &amqp.Target{Address: "$cbs"}); a.Target == nil {
		t.Fatalf("first $cbs sender refused: %+v", a)
	}
	r.begin(1)
	a := r.attach(1, "cbs-2", 0, amqp.RoleSender, &amqp.Source{}, &amqp.Target{Address: "$cbs"})
	if a.Target != nil {
		t.Fatalf("second $cbs sender accepted: %+v", a)
	}
	d := rawNext[*amqp.Detach](r)
	if d.Error == nil || d.Error.Condition != "amqp:not-allowed" {
		t.Fatalf("want detach with amqp:not-allowed, got %+v", d)
	}
	r.write(amqp.FrameTypeAMQP, 1, &amqp.Detach{Handle: 0, Closed: true}, nil)
	// Once the first one is gone a new one may attach.
	r.write(amqp.FrameTypeAMQP, 0, &amqp.Detach{Handle: 0, Closed: true}, nil)
	rawNext[*amqp.Detach](r)
	if a := r.attach(0, "cbs-3", 1, amqp.RoleSender, &amqp.Source{}, &amqp.Target{Address: "$cbs"}); a.Target == nil {
		t.Fatalf("$cbs sender after the first detached refused: %+v", a)
	}
}
