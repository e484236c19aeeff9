package emulator

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ehmirror/ehmirror/emulator/amqp"
)

// rpcResponse is the outcome of a $cbs or $management request.
type rpcResponse struct {
	status int32
	desc   string
	body   any // amqp-value, or nil for none
}

// handleRequest answers a request delivered on a $cbs or $management request
// link; the response goes to the reply link whose target address is the
// request's reply-to, or else to the reply link named by it. A request
// without reply-to (the Python SDK sends none) is answered at the request
// link's source address: its reply link attaches with that target.
func (l *link) handleRequest(payload []byte) {
	c := l.s.c
	var req amqp.Message
	if err := req.Unmarshal(payload); err != nil {
		c.log.Info("malformed RPC request", "node", l.node, "err", err)
		return
	}
	if req.Properties == nil {
		req.Properties = &amqp.Properties{}
	}
	if req.Properties.ReplyTo == "" {
		req.Properties.ReplyTo = l.address
	}
	if req.Properties.ReplyTo == "" {
		c.log.Info("RPC request without reply-to from a link without a source address", "node", l.node)
		return
	}
	props := stringProps(req.ApplicationProperties)
	var resp rpcResponse
	switch l.node {
	case "$cbs":
		resp = c.putToken(props, req.Value)
	default:
		if d := c.srv.faults.managementDelay(); d > 0 {
			time.Sleep(d)
		}
		resp = c.management(props)
	}
	c.log.Debug("RPC", "node", l.node, "operation", props["operation"], "name", props["name"], "status", resp.status, "description", resp.desc)
	msg := amqp.Message{
		Properties: &amqp.Properties{CorrelationID: req.Properties.MessageID},
		ApplicationProperties: amqp.Map{
			{Key: "status-code", Value: resp.status},
			{Key: "status-description", Value: resp.desc},
		},
	}
	if resp.body != nil {
		msg.Value, msg.HasValue = resp.body, true
	}
	encoded, err := msg.Append(nil)
	if err != nil {
		c.log.Error("encode RPC response", "err", err)
		return
	}
	c.mu.Lock()
	reply := c.replyLinks[req.Properties.ReplyTo]
	if reply == nil {
		// A client may attach its reply receiver without a target address
		// and name the link itself in reply-to, as the service allows.
		reply = c.replyNames[req.Properties.ReplyTo]
	}
	c.mu.Unlock()
	if reply == nil {
		c.log.Info("RPC response dropped: no reply link attached", "reply-to", req.Properties.ReplyTo)
		return
	}
	reply.sendReply(encoded)
}

// stringProps returns the string-valued application properties with string
// keys.
func stringProps(m amqp.Map) map[string]string {
	out := make(map[string]string, len(m))
	for _, e := range m {
		k, ok := e.Key.(string)
		if !ok {
			continue
		}
		switch v := e.Value.(type) {
		case string:
			out[k] = v
		case amqp.Symbol:
			out[k] = string(v)
		}
	}
	return out
}

// management handles a $management request: READ of com.microsoft:eventhub
// or com.microsoft:partition. A string security_token must be valid for the
// entity; without one (the Python SDK sends its token object, not a string)
// the token the connection put on $cbs for the entity authorizes the read.
func (c *conn) management(props map[string]string) rpcResponse {
	srv := c.srv
	if props["operation"] != "READ" {
		return rpcResponse{status: 400, desc: fmt.Sprintf("unsupported $management operation %q", props["operation"])}
	}
	name := props["name"]
	if !srv.cfg.AcceptAnyToken {
		if token, ok := props["security_token"]; ok {
			if _, err := srv.checkToken(token, "sb://"+srv.cfg.Namespace+"/"+name, c.nc.RemoteAddr()); err != nil {
				return rpcResponse{status: 401, desc: err.Error()}
			}
		} else if c.authorize(name, 0) != nil {
			return rpcResponse{status: 401, desc: fmt.Sprintf("Unauthorized access. The request has no security_token and the connection put no token for 'sb://%s/%s' on $cbs.", srv.cfg.Namespace, strings.ToLower(name))}
		}
	}
	h, e := srv.lookupHub(name)
	if e != nil {
		return rpcResponse{status: 404, desc: e.Description}
	}
	switch props["type"] {
	case "com.microsoft:eventhub":
		ids := make(amqp.Array, len(h.partitions))
		for i := range ids {
			ids[i] = strconv.Itoa(i)
		}
		return rpcResponse{status: 200, desc: "OK", body: amqp.Map{
			{Key: "name", Value: h.cfg.Name},
			{Key: "type", Value: amqp.Symbol("com.microsoft:eventhub")},
			{Key: "created_at", Value: h.createdAt},
			{Key: "partition_count", Value: int32(len(h.partitions))},
			{Key: "partition_ids", Value: ids},
			{Key: "georeplication_factor", Value: int32(1)},
		}}
	case "com.microsoft:partition":
		if srv.faults.partitionReadFails(h.cfg.Name) {
			return rpcResponse{status: 503, desc: "The service is busy (emulator fault: partition reads of this hub fail)."}
		}
		p, e := lookupPartition(h, props["partition"])
		if e != nil {
			return rpcResponse{status: 400, desc: e.Description}
		}
		info := h.partitions[p].info(srv.now())
		return rpcResponse{status: 200, desc: "OK", body: amqp.Map{
			{Key: "name", Value: h.cfg.Name},
			{Key: "type", Value: amqp.Symbol("com.microsoft:partition")},
			{Key: "partition", Value: props["partition"]},
			{Key: "begin_sequence_number", Value: info.beginSeq},
			{Key: "last_enqueued_sequence_number", Value: info.lastSeq},
			{Key: "last_enqueued_offset", Value: strconv.FormatInt(info.lastOffset, 10)},
			{Key: "last_enqueued_time_utc", Value: amqp.Timestamp(info.lastEnqueued)},
			{Key: "is_partition_empty", Value: info.empty},
		}}
	}
	return rpcResponse{status: 400, desc: fmt.Sprintf("unsupported $management type %q", props["type"])}
}
