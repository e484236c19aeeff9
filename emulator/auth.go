package emulator

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ehmirror/ehmirror/emulator/amqp"
)

// Rights of shared access policies and Entra ID roles.
const (
	RightListen = "Listen" // receive events
	RightSend   = "Send"   // send events
	RightManage = "Manage" // manage entities; implies Listen and Send
)

// Policy is a shared access policy of the namespace or of one event hub: a
// key name, its key, and the rights a token signed with the key grants.
type Policy struct {
	// Name is the key name tokens carry in skn.
	Name string
	// Key signs tokens (its string bytes are the HMAC key, as the SDK uses them).
	Key string
	// Rights are "Listen", "Send" and "Manage" (which implies the other two).
	Rights []string
}

// rights is a set of rights.
type rights uint8

const (
	rightListen rights = 1 << iota
	rightSend
	rightManage
)

// String names the first right of the set, as the service names a missing
// claim.
func (r rights) String() string {
	switch {
	case r&rightSend != 0:
		return RightSend
	case r&rightListen != 0:
		return RightListen
	case r&rightManage != 0:
		return RightManage
	}
	return "none"
}

// parseRights converts rights names (case-insensitive); Manage implies
// Listen and Send.
func parseRights(names []string) (rights, error) {
	var r rights
	for i, n := range names {
		switch {
		case strings.EqualFold(n, RightListen):
			r |= rightListen
		case strings.EqualFold(n, RightSend):
			r |= rightSend
		case strings.EqualFold(n, RightManage):
			r |= rightManage | rightListen | rightSend
		default:
			return 0, fmt.Errorf("Rights[%d]: unknown right %q, want Listen, Send or Manage", i, n)
		}
	}
	return r, nil
}

func validatePolicies(ps []Policy) error {
	seen := map[string]bool{}
	for i, p := range ps {
		if p.Name == "" || p.Key == "" {
			return fmt.Errorf("Policies[%d]: a policy needs a Name and a Key", i)
		}
		if seen[p.Name] {
			return fmt.Errorf("Policies[%d].Name: duplicate policy %q", i, p.Name)
		}
		seen[p.Name] = true
		if _, err := parseRights(p.Rights); err != nil {
			return fmt.Errorf("Policies[%d].%w", i, err)
		}
	}
	return nil
}

// claim is an audience path the connection holds a valid token for.
type claim struct {
	path    string // lower-case entity path without slashes at the ends; "" is the namespace
	expires time.Time
	rights  rights
}

// putToken handles a $cbs put-token request. A token whose policy or roles
// lack a right is accepted here; the attach that needs the right is refused.
func (c *conn) putToken(props map[string]string, value any) rpcResponse {
	if props["operation"] != "put-token" {
		return rpcResponse{status: 400, desc: fmt.Sprintf("unsupported $cbs operation %q", props["operation"])}
	}
	audience := props["name"]
	if c.srv.cfg.AcceptAnyToken {
		return rpcResponse{status: 202, desc: "Accepted"}
	}
	token, _ := value.(string)
	cl, err := c.srv.checkToken(token, audience, c.nc.RemoteAddr())
	if err != nil {
		c.log.Info("put-token refused", "audience", audience, "type", props["type"], "err", err)
		return rpcResponse{status: 401, desc: err.Error()}
	}
	c.addClaim(cl)
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

// authorize checks that the connection holds an unexpired claim with the
// right covering the entity path; it always succeeds with AcceptAnyToken.
func (c *conn) authorize(entity string, need rights) *amqp.Error {
	if c.srv.cfg.AcceptAnyToken {
		return nil
	}
	want := strings.ToLower(strings.Trim(entity, "/"))
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cl := range c.claims {
		if now.Before(cl.expires) && covers(cl.path, want) && cl.rights&need == need {
			return nil
		}
	}
	return &amqp.Error{Condition: "amqp:unauthorized-access", Description: fmt.Sprintf(
		"Unauthorized access. '%s' claim(s) are required to perform this operation. Resource: 'sb://%s/%s'.", need, c.srv.cfg.Namespace, want)}
}

// covers reports whether a token for path scope grants access to path.
func covers(scope, path string) bool {
	return scope == "" || scope == path || strings.HasPrefix(path, scope+"/")
}

// checkToken validates a put-token (or management security_token) token for
// the audience: a SAS token ("SharedAccessSignature sr=…") or else an Entra ID
// JWT. remote is the client's address.
func (srv *Server) checkToken(token, audience string, remote net.Addr) (claim, error) {
	if rest, ok := strings.CutPrefix(token, "SharedAccessSignature "); ok {
		return srv.checkSAS(rest, audience)
	}
	return srv.checkJWT(token, audience, remote)
}

// checkSAS validates the fields of a SAS token for the audience: key name,
// HMAC-SHA256 signature over the raw sr value, "\n" and se, expiry against
// the wall clock, and scope. The key name is looked up among the policies of
// the event hub the token is scoped to, then among the namespace's.
func (srv *Server) checkSAS(fieldsText, audience string) (claim, error) {
	fields := map[string]string{}
	for _, kv := range strings.Split(fieldsText, "&") {
		k, v, _ := strings.Cut(kv, "=")
		fields[k] = v
	}
	sr, sig, se, skn := fields["sr"], fields["sig"], fields["se"], fields["skn"]
	if sr == "" || sig == "" || se == "" || skn == "" {
		return claim{}, errors.New("InvalidToken: the SAS token lacks one of sr, sig, se, skn")
	}
	resource, err := url.QueryUnescape(sr)
	if err != nil {
		return claim{}, fmt.Errorf("InvalidToken: invalid sr %q", sr)
	}
	scope := resourcePath(resource)
	pol, ok := srv.policy(scope, skn)
	if !ok {
		return claim{}, fmt.Errorf("InvalidSignature: The token has an invalid signature. (no shared access policy %q covers %q)", skn, resource)
	}
	mac := hmac.New(sha256.New, []byte(pol.Key))
	mac.Write([]byte(sr + "\n" + se))
	want := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	got, err := url.QueryUnescape(sig)
	if err != nil || !hmac.Equal([]byte(got), []byte(want)) {
		return claim{}, fmt.Errorf("InvalidSignature: The token has an invalid signature. (key of policy %q)", skn)
	}
	exp, err := strconv.ParseInt(se, 10, 64)
	if err != nil {
		return claim{}, fmt.Errorf("InvalidToken: invalid expiry %q", se)
	}
	expires := time.Unix(exp, 0)
	if !time.Now().Before(expires) {
		return claim{}, expiredToken(expires)
	}
	if audience != "" && !covers(scope, resourcePath(audience)) {
		return claim{}, fmt.Errorf("InvalidAudience: the token for %q does not grant access to %q", resource, audience)
	}
	r, _ := parseRights(pol.Rights) // validated by Start
	return claim{path: scope, expires: expires, rights: r}, nil
}

func expiredToken(expires time.Time) error {
	return fmt.Errorf("ExpiredToken: The token is expired. Expiration time: '%s'", expires.UTC().Format("2006-01-02 15:04:05Z"))
}

// policy finds the shared access policy named name for a token scoped to
// scope: a policy of the scope's event hub, or a namespace policy (the
// configured KeyName/Key is the namespace's Manage policy).
func (srv *Server) policy(scope, name string) (Policy, bool) {
	if hubName, _, _ := strings.Cut(scope, "/"); hubName != "" {
		if h := srv.hub(hubName); h != nil {
			for _, p := range h.cfg.Policies {
				if p.Name == name {
					return p, true
				}
			}
		}
	}
	if name == srv.cfg.KeyName {
		return Policy{Name: name, Key: srv.cfg.Key, Rights: []string{RightManage}}, true
	}
	for _, p := range srv.cfg.Policies {
		if p.Name == name {
			return p, true
		}
	}
	return Policy{}, false
}

// resourcePath returns the lower-case entity path of a token resource ("" for
// the namespace itself). Like the service it reads a resource with a scheme
// (amqp://host:port/hub/Partitions/0, sb://host/hub) and a scheme-less one
// (host/hub, host, as the SDK's SAS helper signs it) as host plus optional
// path.
func resourcePath(uri string) string {
	if i := strings.Index(uri, "://"); i >= 0 {
		uri = uri[i+3:]
	}
	_, path, _ := strings.Cut(uri, "/")
	return strings.ToLower(strings.Trim(path, "/"))
}
