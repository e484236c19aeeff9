package kafka

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/segmentio/kafka-go/sasl"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// Token is a bearer token for SASL/OAUTHBEARER. Its Value is a secret: it
// is never logged nor put in an error.
type Token struct {
	// Value is the access token (usually a JWT).
	Value string
	// Expiry is when the token stops being valid; zero if unknown.
	Expiry time.Time
}

// TokenSource obtains bearer tokens. host is the broker being authenticated
// to (the Entra ID source derives its default scope from it). It must be
// safe for concurrent use.
type TokenSource interface {
	Token(ctx context.Context, host string) (Token, error)
}

// OAuthSettings name, in errors, the settings an operator changes to fix
// them (the config package passes its setting names). Empty fields read
// "token endpoint", "client id", "client secret", "scope" and
// "extensions".
type OAuthSettings struct {
	TokenEndpoint string
	ClientID      string
	ClientSecret  string
	Scope         string
	Extensions    string
}

func (n OAuthSettings) withDefaults() OAuthSettings {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&n.TokenEndpoint, "token endpoint")
	def(&n.ClientID, "client id")
	def(&n.ClientSecret, "client secret")
	def(&n.Scope, "scope")
	def(&n.Extensions, "extensions")
	return n
}

// OAuthBearer configures SASL/OAUTHBEARER (RFC 7628, KIP-255).
type OAuthBearer struct {
	// Tokens supplies the bearer tokens. Required.
	Tokens TokenSource
	// Extensions are sent with every authentication as SASL extensions
	// (KIP-342), for example logicalCluster and identityPoolId for
	// Confluent Cloud identity pools.
	Extensions map[string]string
	// Principal describes who authenticates (a client id, a managed
	// identity), for status and logs; it is not sent to the broker.
	Principal string
	// Names name the settings in errors.
	Names OAuthSettings
}

// authState is what status shows about authentication: never the token.
type authState struct {
	mu        sync.Mutex
	mechanism string
	principal string
	expiry    time.Time
	lastErr   string
}

// AuthStatus describes a Source's SASL authentication: mechanism, principal
// and the expiry of the newest credential. It never holds a token or secret.
type AuthStatus struct {
	// Mechanism is the SASL mechanism, "" for none.
	Mechanism string `json:"mechanism,omitempty"`
	// Principal is the client id, identity or role authenticating.
	Principal string `json:"principal,omitempty"`
	// TokenExpiry is the expiry of the newest token or signature used; zero
	// before the first authentication and for PLAIN and SCRAM.
	TokenExpiry time.Time `json:"token_expiry,omitzero"`
	// LastError is the newest failure to obtain a credential, "" after a
	// success.
	LastError string `json:"last_error,omitempty"`
}

func (a *authState) status() AuthStatus {
	if a == nil {
		return AuthStatus{}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return AuthStatus{Mechanism: a.mechanism, Principal: a.principal, TokenExpiry: a.expiry, LastError: a.lastErr}
}

func (a *authState) ok(principal string, expiry time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if principal != "" {
		a.principal = principal
	}
	if expiry.After(a.expiry) || expiry.IsZero() {
		a.expiry = expiry
	}
	a.lastErr = ""
}

func (a *authState) fail(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lastErr = err.Error()
}

// reauthenticates reports whether mech's connections are dialed by a
// saslDialer, which re-authenticates them before their session ends.
func reauthenticates(mech sasl.Mechanism) bool {
	switch mech.(type) {
	case *oauthMechanism, *mskMechanism:
		return true
	}
	return false
}

// oauthMechanism is kafka-go's sasl.Mechanism for OAUTHBEARER.
type oauthMechanism struct {
	o     OAuthBearer
	names OAuthSettings
	state *authState
	now   func() time.Time

	mu     sync.Mutex
	claims jwtClaims // of the newest token sent
}

// lastClaims returns the claims of the newest token sent.
func (m *oauthMechanism) lastClaims() jwtClaims {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.claims
}

func newOAuthMechanism(o OAuthBearer, state *authState) (*oauthMechanism, error) {
	if o.Tokens == nil {
		return nil, errors.New("kafka: SASL oauthbearer needs a token source")
	}
	for k, v := range o.Extensions {
		if !validExtensionKey(k) {
			return nil, fmt.Errorf("kafka: SASL extension name %q: want letters only, not \"auth\"", k)
		}
		if strings.ContainsRune(v, '\x01') {
			return nil, fmt.Errorf("kafka: SASL extension %s: value holds a control character", k)
		}
	}
	state.mechanism = "OAUTHBEARER"
	state.principal = o.Principal
	return &oauthMechanism{o: o, names: o.Names.withDefaults(), state: state, now: time.Now}, nil
}

// validExtensionKey follows RFC 7628 §3.1: key = 1*(ALPHA), and "auth" is
// reserved.
func validExtensionKey(k string) bool {
	if k == "" || k == "auth" {
		return false
	}
	for _, r := range k {
		if (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') {
			return false
		}
	}
	return true
}

// Name implements sasl.Mechanism.
func (m *oauthMechanism) Name() string { return "OAUTHBEARER" }

// Start implements sasl.Mechanism: it obtains a token (cached and refreshed
// by the token source) and returns the client's first message (RFC 7628
// §3.1): gs2 header, auth=Bearer token, the extensions, each ended by ^A.
func (m *oauthMechanism) Start(ctx context.Context) (sasl.StateMachine, []byte, error) {
	host := ""
	if md := sasl.MetadataFromContext(ctx); md != nil {
		host = md.Host
	}
	tok, err := m.o.Tokens.Token(ctx, host)
	if err != nil {
		m.state.fail(err)
		return nil, nil, err
	}
	claims := peekClaims(tok.Value)
	m.mu.Lock()
	m.claims = claims
	m.mu.Unlock()
	exp := tok.Expiry
	if !claims.expiry().IsZero() {
		exp = claims.expiry()
	}
	if !exp.IsZero() && !m.now().Before(exp) {
		err := fmt.Errorf("%s: the token endpoint issued a token that expired at %s (check the token endpoint's clock and token lifetime)", m.names.TokenEndpoint, exp.UTC().Format(time.RFC3339))
		m.state.fail(err)
		return nil, nil, err
	}
	m.state.ok(claims.principal(), exp)
	var b strings.Builder
	b.WriteString("n,,\x01auth=Bearer ")
	b.WriteString(tok.Value)
	b.WriteByte('\x01')
	for _, k := range slices.Sorted(maps.Keys(m.o.Extensions)) {
		b.WriteString(k + "=" + m.o.Extensions[k] + "\x01")
	}
	b.WriteByte('\x01')
	return &oauthSession{m: m, claims: claims}, []byte(b.String()), nil
}

type oauthSession struct {
	m      *oauthMechanism
	claims jwtClaims
}

// Next implements sasl.StateMachine. An empty server message ends a
// successful exchange; anything else is the broker's JSON error (RFC 7628
// §3.2.2), which ends the attempt with an error listing the likely causes
// with what the token carried for each (the broker's status, usually
// invalid_token, does not say which).
func (s *oauthSession) Next(_ context.Context, challenge []byte) (bool, []byte, error) {
	if len(challenge) == 0 {
		return true, nil, nil
	}
	var e struct {
		Status string `json:"status"`
		Scope  string `json:"scope"`
	}
	status := "refused"
	if json.Unmarshal(challenge, &e) == nil && e.Status != "" {
		status = e.Status
	}
	err := fmt.Errorf("the broker refused the OAUTHBEARER token (%s) without saying why; %s", oneLine(status), s.m.candidates(s.claims))
	s.m.state.fail(err)
	return false, nil, err
}

// candidates lists what makes a broker refuse a token, with what the
// token carried for each and the setting that changes it.
func (m *oauthMechanism) candidates(c jwtClaims) string {
	orNone := func(s string) string {
		if s == "" {
			return "(none)"
		}
		return s
	}
	exp := "(none)"
	if t := c.expiry(); !t.IsZero() {
		exp = fmt.Sprintf("%s, %s from now by this host's clock", t.UTC().Format(time.RFC3339), t.Sub(m.now()).Round(time.Second))
	}
	return fmt.Sprintf("the candidates, with what the token carried: the audience is %s (%s: the scope must give the audience the broker expects); "+
		"the issuer is %s, signed with key %s (%s: the broker must trust this issuer and fetch its signing keys); "+
		"the expiry is %s (clock skew: the broker's clock must agree, and a token must not be used past its expiry)",
		orNone(strings.Join(c.audiences(), ",")), m.names.Scope, orNone(c.Iss), orNone(c.kid), m.names.TokenEndpoint, exp)
}

// refused implements refuser: the broker refused the authentication with
// an error code. Kafka refuses missing or wrong SASL extensions so
// (naming them); anything else lists the candidates.
func (m *oauthMechanism) refused(code int16, msg string) error {
	var err error
	if strings.Contains(strings.ToLower(msg), "extension") {
		sent := strings.Join(slices.Sorted(maps.Keys(m.o.Extensions)), ", ")
		if sent == "" {
			sent = "none"
		}
		err = fmt.Errorf("%s: the broker refused the SASL extensions (error code %d: %s); sent: %s; set the extensions the broker requires as key=value,key=value (Confluent Cloud identity pools: logicalCluster=lkc-…,identityPoolId=pool-…)",
			m.names.Extensions, code, oneLine(msg), sent)
	} else {
		err = fmt.Errorf("the broker refused the OAUTHBEARER authentication (error code %d: %s); %s", code, oneLine(msg), m.candidates(m.lastClaims()))
	}
	m.state.fail(err)
	return err
}

// oneLine keeps a broker-supplied text to one short line.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// jwtClaims are the registered claims of a token, read without verifying
// it, for errors and status only.
type jwtClaims struct {
	// kid is the signing key's id, from the header.
	kid   string
	Iss   string          `json:"iss"`
	Sub   string          `json:"sub"`
	Aud   json.RawMessage `json:"aud"`
	Exp   float64         `json:"exp"`
	AppID string          `json:"appid"`
	AZP   string          `json:"azp"`
	OID   string          `json:"oid"`
}

// peekClaims decodes a JWT's payload; the zero value if tok is no JWT.
func peekClaims(tok string) jwtClaims {
	var c jwtClaims
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return c
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return c
	}
	_ = json.Unmarshal(b, &c)
	var h struct {
		Kid string `json:"kid"`
	}
	if hb, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[0], "=")); err == nil && json.Unmarshal(hb, &h) == nil {
		c.kid = h.Kid
	}
	return c
}

func (c jwtClaims) expiry() time.Time {
	if c.Exp <= 0 {
		return time.Time{}
	}
	return time.Unix(int64(c.Exp), 0)
}

func (c jwtClaims) audiences() []string {
	var one string
	if json.Unmarshal(c.Aud, &one) == nil && one != "" {
		return []string{one}
	}
	var many []string
	_ = json.Unmarshal(c.Aud, &many)
	return many
}

// principal is the token's client or subject: appid/azp (Entra ID), else
// sub.
func (c jwtClaims) principal() string {
	for _, p := range []string{c.AppID, c.AZP, c.Sub} {
		if p != "" {
			return p
		}
	}
	return ""
}

// ClientCredentials configures [NewClientCredentialsTokens]: an OAuth 2.0
// client credentials grant (RFC 6749 §4.4) at an OIDC provider's token
// endpoint.
type ClientCredentials struct {
	// TokenURL is the token endpoint. Required.
	TokenURL string
	// ClientID and ClientSecret authenticate the client. The secret is
	// never logged nor put in an error.
	ClientID     string
	ClientSecret string
	// Scopes are requested with every token (space-separated on the wire).
	Scopes []string
	// Names name the settings in errors.
	Names OAuthSettings
}

// tokenCache caches one token and refreshes it ahead of its expiry: a
// request made in the last two thirds of the token's life starts a refresh
// in the background and still gets the current token; one made when less
// than a margin is left (a tenth of the life, at least 30 s or half of it)
// waits for a new one, so that a token never expires on its way to the
// broker. A failed background refresh is retried by the next request.
type tokenCache struct {
	fetch func(ctx context.Context) (Token, error)
	now   func() time.Time

	mu         sync.Mutex
	tok        Token
	fetched    time.Time
	refreshing bool
}

func (c *tokenCache) Token(ctx context.Context, _ string) (Token, error) {
	c.mu.Lock()
	tok, fetched, now := c.tok, c.fetched, c.now()
	if tok.Value != "" && !tok.Expiry.IsZero() {
		life := tok.Expiry.Sub(fetched)
		left := tok.Expiry.Sub(now)
		if left > max(life/10, min(30*time.Second, life/2)) {
			if left < life*2/3 && !c.refreshing {
				c.refreshing = true
				go c.refresh(context.WithoutCancel(ctx), life/2)
			}
			c.mu.Unlock()
			return tok, nil
		}
	}
	c.mu.Unlock()
	return c.get(ctx)
}

// refresh fetches a token in the background within d.
func (c *tokenCache) refresh(ctx context.Context, d time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, max(d, time.Second))
	defer cancel()
	_, _ = c.get(ctx)
	c.mu.Lock()
	c.refreshing = false
	c.mu.Unlock()
}

func (c *tokenCache) get(ctx context.Context) (Token, error) {
	start := c.now()
	tok, err := c.fetch(ctx)
	if err != nil {
		return Token{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if tok.Expiry.After(c.tok.Expiry) || tok.Expiry.IsZero() {
		c.tok, c.fetched = tok, start
	}
	return tok, nil
}

// NewClientCredentialsTokens returns a TokenSource that obtains tokens with
// golang.org/x/oauth2/clientcredentials, caches them and refreshes them
// ahead of their expiry. Errors are one line naming the setting to check:
// the token endpoint when it cannot be reached or answers garbage, the
// client secret when the endpoint refuses the client, the scope when it
// refuses the scope.
func NewClientCredentialsTokens(c ClientCredentials) (TokenSource, error) {
	names := c.Names.withDefaults()
	u, err := url.Parse(c.TokenURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("%s: %q is not an http(s) URL", names.TokenEndpoint, c.TokenURL)
	}
	if c.ClientID == "" {
		return nil, fmt.Errorf("%s: missing; the client credentials grant needs a client id", names.ClientID)
	}
	cfg := &clientcredentials.Config{ClientID: c.ClientID, ClientSecret: c.ClientSecret, TokenURL: c.TokenURL, Scopes: c.Scopes}
	fetch := func(ctx context.Context) (Token, error) {
		t, err := cfg.Token(ctx)
		if err != nil {
			return Token{}, describeTokenError(err, c, names)
		}
		return withJWTExpiry(Token{Value: t.AccessToken, Expiry: t.Expiry}), nil
	}
	return &tokenCache{fetch: fetch, now: time.Now}, nil
}

// withJWTExpiry lowers tok.Expiry to the JWT's exp claim when that is
// earlier: expires_in counts from the answer, exp is whole seconds from
// when the token was signed.
func withJWTExpiry(tok Token) Token {
	if exp := peekClaims(tok.Value).expiry(); !exp.IsZero() && (tok.Expiry.IsZero() || exp.Before(tok.Expiry)) {
		tok.Expiry = exp
	}
	return tok
}

// describeTokenError turns a token request failure into one line naming the
// setting to check, without the secret.
func describeTokenError(err error, c ClientCredentials, names OAuthSettings) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		code := re.ErrorCode
		if code == "" {
			code = fmt.Sprintf("HTTP %d", re.Response.StatusCode)
		}
		desc := oneLine(re.ErrorDescription)
		if desc != "" {
			desc = ": " + desc
		}
		switch {
		case re.ErrorCode == "invalid_scope":
			return fmt.Errorf("%s: the token endpoint refused the scope %q (%s%s)", names.Scope, strings.Join(c.Scopes, " "), code, desc)
		case re.ErrorCode == "invalid_client" || re.ErrorCode == "unauthorized_client" || re.Response.StatusCode == 401:
			return fmt.Errorf("%s: the token endpoint refused client %q (%s%s); check the client id and secret", names.ClientSecret, c.ClientID, code, desc)
		default:
			return fmt.Errorf("%s: the token endpoint %s answered %s%s", names.TokenEndpoint, c.TokenURL, code, desc)
		}
	}
	msg := err.Error()
	if c.ClientSecret != "" {
		msg = strings.ReplaceAll(msg, c.ClientSecret, "<redacted>")
	}
	return fmt.Errorf("%s: no token from %s: %s", names.TokenEndpoint, c.TokenURL, oneLine(msg))
}

// EntraTokens configures [NewEntraTokens]: tokens from Microsoft Entra ID
// through an azidentity credential.
type EntraTokens struct {
	// Credential obtains the tokens (managed identity, workload identity,
	// az login). Required.
	Credential azcore.TokenCredential
	// Scope is requested for every token. Empty means
	// "https://<broker host>/.default", what the Event Hubs Kafka endpoint
	// expects.
	Scope string
	// Names name the settings in errors (TokenEndpoint names the identity
	// setting).
	Names OAuthSettings
}

// NewEntraTokens returns a TokenSource backed by an azidentity credential,
// which caches tokens and refreshes them ahead of expiry itself.
func NewEntraTokens(e EntraTokens) (TokenSource, error) {
	if e.Credential == nil {
		return nil, errors.New("kafka: Entra ID token source needs a credential")
	}
	return &entraTokens{e: e, names: e.Names.withDefaults()}, nil
}

type entraTokens struct {
	e     EntraTokens
	names OAuthSettings
}

// EntraScope is the default Entra ID scope for a broker host.
func EntraScope(host string) string { return "https://" + host + "/.default" }

func (s *entraTokens) Token(ctx context.Context, host string) (Token, error) {
	scope := s.e.Scope
	if scope == "" {
		if host == "" {
			return Token{}, fmt.Errorf("%s: not set and the broker host is unknown; set the scope", s.names.Scope)
		}
		scope = EntraScope(host)
	}
	t, err := s.e.Credential.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{scope}})
	if err != nil {
		return Token{}, fmt.Errorf("%s: no Microsoft Entra ID token for scope %s: %s", s.names.TokenEndpoint, scope, oneLine(err.Error()))
	}
	return withJWTExpiry(Token{Value: t.Token, Expiry: t.ExpiresOn}), nil
}
