package emulator

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/url"
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
// request's reply-to, or else to the reply link named by it.
func (l *link) handleRequest(payload []byte) {
	c := l.s.c
	var req amqp.Message
	if err := req.Unmarshal(payload); err != nil {
		c.log.Info("malformed RPC request", "node", l.node, "err", err)
		return
	}
	if req.Properties == nil || req.Properties.ReplyTo == "" {
		c.log.Info("RPC request without reply-to", "node", l.node)
		return
	}
	props := stringProps(req.ApplicationProperties)
	var resp rpcResponse
	switch l.node {
	case "$cbs":
		resp = c.putToken(props, req.Value)
	default:
		resp = c.srv.management(props)
	}
	c.log.Debug("RPC", "node", l.node, "operation", props["operation"], "name", props["name"], "status", resp.status)
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

// claim is an audience path the connection holds a valid token for.
type claim struct {
	path    string // lower-case entity path without slashes at the ends; "" is the namespace
	expires time.Time
}

// putToken handles a $cbs put-token request.
func (c *conn) putToken(props map[string]string, value any) rpcResponse {
	if props["operation"] != "put-token" {
		return rpcResponse{status: 400, desc: fmt.Sprintf("unsupported $cbs operation %q", props["operation"])}
	}
	audience := props["name"]
	if c.srv.cfg.AcceptAnyToken {
		return rpcResponse{status: 202, desc: "Accepted"}
	}
	token, _ := value.(string)
	path, expires, err := c.srv.checkToken(token, audience)
	if err != nil {
		c.log.Info("put-token refused", "audience", audience, "err", err)
		return rpcResponse{status: 401, desc: err.Error()}
	}
	c.addClaim(claim{path: path, expires: expires})
	return rpcResponse{status: 202, desc: "Accepted"}
}

// addClaim records a claim, replacing an older one for the same path and
// forgetting expired ones, so token refreshes do not accumulate.
func (c *conn) addClaim(cl claim) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := c.claims[:0]
	for _, old := range c.claims {
		if old.path != cl.path && now.Before(old.expires) {
			kept = append(kept, old)
		}
	}
	c.claims = append(kept, cl)
}

// authorize checks that the connection holds an unexpired claim covering the
// entity path; it always succeeds with AcceptAnyToken.
func (c *conn) authorize(entity string) *amqp.Error {
	if c.srv.cfg.AcceptAnyToken {
		return nil
	}
	want := strings.ToLower(strings.Trim(entity, "/"))
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cl := range c.claims {
		if now.Before(cl.expires) && covers(cl.path, want) {
			return nil
		}
	}
	return &amqp.Error{Condition: "amqp:unauthorized-access", Description: fmt.Sprintf("no valid token for %q on this connection: send a $cbs put-token first", entity)}
}

// covers reports whether a token for path scope grants access to path.
func covers(scope, path string) bool {
	return scope == "" || scope == path || strings.HasPrefix(path, scope+"/")
}

// checkToken validates a SAS token ("SharedAccessSignature sr=…&sig=…&se=…&skn=…")
// for the audience: key name, HMAC-SHA256 signature over the raw sr value,
// "\n" and se, expiry against the wall clock, and scope. It returns the
// token's lower-case entity path and expiry.
func (srv *Server) checkToken(token, audience string) (string, time.Time, error) {
	rest, ok := strings.CutPrefix(token, "SharedAccessSignature ")
	if !ok {
		return "", time.Time{}, fmt.Errorf("not a SharedAccessSignature token")
	}
	fields := map[string]string{}
	for _, kv := range strings.Split(rest, "&") {
		k, v, _ := strings.Cut(kv, "=")
		fields[k] = v
	}
	sr, sig, se, skn := fields["sr"], fields["sig"], fields["se"], fields["skn"]
	if sr == "" || sig == "" || se == "" || skn == "" {
		return "", time.Time{}, fmt.Errorf("token lacks one of sr, sig, se, skn")
	}
	if skn != srv.cfg.KeyName {
		return "", time.Time{}, fmt.Errorf("unknown shared access key name %q", skn)
	}
	mac := hmac.New(sha256.New, []byte(srv.cfg.Key))
	mac.Write([]byte(sr + "\n" + se))
	want := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	got, err := url.QueryUnescape(sig)
	if err != nil || !hmac.Equal([]byte(got), []byte(want)) {
		return "", time.Time{}, fmt.Errorf("invalid signature for key %q", skn)
	}
	exp, err := strconv.ParseInt(se, 10, 64)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("invalid expiry %q", se)
	}
	expires := time.Unix(exp, 0)
	if !time.Now().Before(expires) {
		return "", time.Time{}, fmt.Errorf("token expired at %s", expires.UTC().Format(time.RFC3339))
	}
	resource, err := url.QueryUnescape(sr)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("invalid sr %q", sr)
	}
	scope := resourcePath(resource)
	if audience != "" && !covers(scope, resourcePath(audience)) {
		return "", time.Time{}, fmt.Errorf("token for %q does not grant access to %q", resource, audience)
	}
	return scope, expires, nil
}

// resourcePath returns the lower-case entity path of a resource URI such as
// amqp://host:port/hub/Partitions/0 ("" for the namespace itself).
func resourcePath(uri string) string {
	if i := strings.Index(uri, "://"); i >= 0 {
		uri = uri[i+3:]
		_, uri, _ = strings.Cut(uri, "/")
	}
	return strings.ToLower(strings.Trim(uri, "/"))
}

// management handles a $management request: READ of com.microsoft:eventhub
// or com.microsoft:partition.
func (srv *Server) management(props map[string]string) rpcResponse {
	if props["operation"] != "READ" {
		return rpcResponse{status: 400, desc: fmt.Sprintf("unsupported $management operation %q", props["operation"])}
	}
	name := props["name"]
	if !srv.cfg.AcceptAnyToken {
		if _, _, err := srv.checkToken(props["security_token"], "sb://namespace/"+name); err != nil {
			return rpcResponse{status: 401, desc: err.Error()}
		}
	}
	h := srv.hub(name)
	if h == nil {
		return rpcResponse{status: 404, desc: fmt.Sprintf("event hub %q does not exist in namespace %q", name, srv.cfg.Namespace)}
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
		p, e := lookupPartition(h, props["partition"])
		if e != nil {
			return rpcResponse{status: 404, desc: e.Description}
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
