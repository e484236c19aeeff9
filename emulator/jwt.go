package emulator

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// Entra ID role names and the rights they grant.
const (
	RoleDataSender   = "Azure Event Hubs Data Sender"   // Send
	RoleDataReceiver = "Azure Event Hubs Data Receiver" // Listen
	RoleDataOwner    = "Azure Event Hubs Data Owner"    // Manage, Send, Listen
)

// DefaultAudiences are the token audiences accepted by default: the one the
// SDKs request (scope https://eventhubs.azure.net//.default), with and
// without the trailing slash.
var DefaultAudiences = []string{"https://eventhubs.azure.net", "https://eventhubs.azure.net/"}

// EntraID makes the emulator accept Entra ID tokens (put-token type "jwt",
// or a JWT as management security_token) next to SAS tokens. A principal is
// identified by the token's oid claim (the object id of the user, service
// principal or managed identity), as Azure role assignments are.
type EntraID struct {
	// RoleAssignments give principals roles on the namespace or one hub.
	RoleAssignments []RoleAssignment
	// SigningKeys verify RS256 token signatures: PEM RSA public keys
	// ("PUBLIC KEY" or "RSA PUBLIC KEY") or certificates.
	SigningKeys []string
	// TrustUnsignedFromLoopback accepts tokens without checking their
	// signature when the client connects from a loopback address (for a
	// local token endpoint that signs with a key the emulator does not
	// know). Expiry, audience and roles are still checked.
	TrustUnsignedFromLoopback bool
	// Audiences are the accepted aud claims (default DefaultAudiences).
	Audiences []string
}

// RoleAssignment gives a principal a role on the namespace (Hub "") or on
// one event hub.
type RoleAssignment struct {
	// Principal is the token's oid claim.
	Principal string
	// Role is RoleDataSender, RoleDataReceiver or RoleDataOwner.
	Role string
	// Hub limits the assignment to one event hub; "" is the whole namespace.
	Hub string
}

func (e EntraID) enabled() bool {
	return len(e.SigningKeys) > 0 || e.TrustUnsignedFromLoopback
}

func roleRights(role string) (rights, error) {
	switch {
	case strings.EqualFold(role, RoleDataSender):
		return rightSend, nil
	case strings.EqualFold(role, RoleDataReceiver):
		return rightListen, nil
	case strings.EqualFold(role, RoleDataOwner):
		return rightManage | rightListen | rightSend, nil
	}
	return 0, fmt.Errorf("unknown role %q, want %q, %q or %q", role, RoleDataSender, RoleDataReceiver, RoleDataOwner)
}

// entraKeys are the parsed signing keys.
type entraKeys []*rsa.PublicKey

// parseEntraID validates e and parses its signing keys.
func parseEntraID(e EntraID) (entraKeys, error) {
	for i, ra := range e.RoleAssignments {
		if ra.Principal == "" {
			return nil, fmt.Errorf("EntraID.RoleAssignments[%d].Principal: empty", i)
		}
		if _, err := roleRights(ra.Role); err != nil {
			return nil, fmt.Errorf("EntraID.RoleAssignments[%d].Role: %w", i, err)
		}
	}
	var keys entraKeys
	for i, k := range e.SigningKeys {
		key, err := parseRSAPublicKey(k)
		if err != nil {
			return nil, fmt.Errorf("EntraID.SigningKeys[%d]: %w", i, err)
		}
		keys = append(keys, key)
	}
	return keys, nil
}

func parseRSAPublicKey(text string) (*rsa.PublicKey, error) {
	block, _ := pem.Decode([]byte(text))
	if block == nil {
		return nil, errors.New("not PEM")
	}
	var pub any
	var err error
	switch block.Type {
	case "CERTIFICATE":
		var cert *x509.Certificate
		if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
			pub = cert.PublicKey
		}
	case "RSA PUBLIC KEY":
		pub, err = x509.ParsePKCS1PublicKey(block.Bytes)
	default:
		pub, err = x509.ParsePKIXPublicKey(block.Bytes)
	}
	if err != nil {
		return nil, fmt.Errorf("PEM %s: %w", block.Type, err)
	}
	key, ok := pub.(*rsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("PEM %s holds a %T, want an RSA public key", block.Type, pub)
	}
	return key, nil
}

// jwtClaims are the token claims the emulator reads.
type jwtClaims struct {
	Aud any     `json:"aud"` // string or array of strings
	Exp float64 `json:"exp"`
	Nbf float64 `json:"nbf"`
	Oid string  `json:"oid"`
}

func (c jwtClaims) audiences() []string {
	switch v := c.Aud.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, a := range v {
			if s, ok := a.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// checkJWT validates an Entra ID token for the audience: signature (or a
// trusted loopback client), expiry, not-before, aud; the claim's rights are
// the roles assigned to the token's oid on the namespace or the audience's
// hub. A token whose principal has no role is accepted; attaches then fail
// with the missing claim, as in the service.
func (srv *Server) checkJWT(token, audience string, remote net.Addr) (claim, error) {
	e := srv.cfg.EntraID
	if !e.enabled() {
		return claim{}, errors.New("InvalidToken: not a SharedAccessSignature token (Entra ID tokens are not enabled in the emulator's configuration)")
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return claim{}, errors.New("InvalidToken: the token is neither a SharedAccessSignature nor a JWT")
	}
	var header struct {
		Alg string `json:"alg"`
	}
	var cl jwtClaims
	if err := decodeJWTPart(parts[0], &header); err != nil {
		return claim{}, fmt.Errorf("InvalidToken: JWT header: %w", err)
	}
	if err := decodeJWTPart(parts[1], &cl); err != nil {
		return claim{}, fmt.Errorf("InvalidToken: JWT payload: %w", err)
	}
	if !srv.jwtSignatureOK(header.Alg, parts) && !(e.TrustUnsignedFromLoopback && isLoopback(remote)) {
		return claim{}, errors.New("InvalidSignature: The token signature could not be verified with the emulator's EntraID.SigningKeys")
	}
	now := time.Now()
	if cl.Exp == 0 {
		return claim{}, errors.New("InvalidToken: the JWT has no exp claim")
	}
	expires := time.Unix(int64(cl.Exp), 0)
	if !now.Before(expires) {
		return claim{}, expiredToken(expires)
	}
	if cl.Nbf != 0 && now.Before(time.Unix(int64(cl.Nbf), 0)) {
		return claim{}, errors.New("InvalidToken: the token is not valid yet (nbf)")
	}
	accepted := e.Audiences
	if len(accepted) == 0 {
		accepted = DefaultAudiences
	}
	okAud := false
	for _, a := range cl.audiences() {
		for _, want := range accepted {
			okAud = okAud || strings.EqualFold(a, want)
		}
	}
	if !okAud {
		return claim{}, fmt.Errorf("InvalidAudience: the token's audience %v is not one of %v", cl.audiences(), accepted)
	}
	if cl.Oid == "" {
		return claim{}, errors.New("InvalidToken: the JWT has no oid claim naming the principal")
	}
	path := resourcePath(audience)
	hubName, _, _ := strings.Cut(path, "/")
	var r rights
	for _, ra := range e.RoleAssignments {
		if !strings.EqualFold(ra.Principal, cl.Oid) || (ra.Hub != "" && !strings.EqualFold(ra.Hub, hubName)) {
			continue
		}
		rr, _ := roleRights(ra.Role) // validated by Start
		r |= rr
	}
	return claim{path: path, expires: expires, rights: r}, nil
}

// jwtSignatureOK verifies an RS256 signature with the configured keys.
func (srv *Server) jwtSignatureOK(alg string, parts []string) bool {
	if alg != "RS256" || len(srv.entraKeys) == 0 {
		return false
	}
	sig, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[2], "="))
	if err != nil {
		return false
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	for _, k := range srv.entraKeys {
		if rsa.VerifyPKCS1v15(k, crypto.SHA256, sum[:], sig) == nil {
			return true
		}
	}
	return false
}

func decodeJWTPart(part string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(part, "="))
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
