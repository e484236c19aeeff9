package sasltest

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Issuer is a local OIDC provider on httptest: a client credentials token
// endpoint (/token), its JWKS (/jwks), and an Azure App Service style
// managed identity endpoint (/msi, the IDENTITY_ENDPOINT protocol that
// azidentity's ManagedIdentityCredential speaks). Tokens are RS256 JWTs.
type Issuer struct {
	srv *httptest.Server
	key *rsa.PrivateKey
	kid string

	// issued counts tokens handed out.
	issued atomic.Int64
	// issuedTo counts them per subject (under mu).
	issuedTo map[string]int64

	mu       sync.Mutex
	clients  map[string]string // client id => secret
	lifetime time.Duration
	expired  bool
	down     bool
	identity string // managed identity's client id
	header   string // IDENTITY_HEADER value
}

// NewIssuer starts an issuer whose tokens live lifetime.
func NewIssuer(lifetime time.Duration) (*Issuer, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("sasltest: issuer key: %w", err)
	}
	is := &Issuer{key: key, kid: "k1", clients: map[string]string{}, issuedTo: map[string]int64{}, lifetime: lifetime, identity: "mi-client-id", header: "sasltest-identity-header"}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /token", is.token)
	mux.HandleFunc("GET /jwks", is.jwks)
	mux.HandleFunc("GET /msi", is.msi)
	is.srv = httptest.NewServer(mux)
	return is, nil
}

// URL is the issuer (the iss claim).
func (is *Issuer) URL() string { return is.srv.URL }

// TokenURL is the client credentials token endpoint.
func (is *Issuer) TokenURL() string { return is.srv.URL + "/token" }

// JWKSURL is the JSON Web Key Set endpoint.
func (is *Issuer) JWKSURL() string { return is.srv.URL + "/jwks" }

// IdentityEndpoint and IdentityHeader are the values of the
// IDENTITY_ENDPOINT and IDENTITY_HEADER environment variables that point
// azidentity's managed identity credential at this issuer.
func (is *Issuer) IdentityEndpoint() string { return is.srv.URL + "/msi" }

// IdentityHeader is the IDENTITY_HEADER secret the /msi endpoint expects.
func (is *Issuer) IdentityHeader() string { return is.header }

// ManagedIdentityClientID is the client id (appid claim) of tokens the
// managed identity endpoint issues.
func (is *Issuer) ManagedIdentityClientID() string { return is.identity }

// AddClient registers a client for the client credentials grant.
func (is *Issuer) AddClient(id, secret string) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.clients[id] = secret
}

// IssueExpired makes the issuer hand out tokens whose exp is already past
// while expires_in still says lifetime (a token endpoint with a wrong
// clock).
func (is *Issuer) IssueExpired(on bool) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.expired = on
}

// Down makes the token endpoints answer 503 (an outage) until called
// with false.
func (is *Issuer) Down(on bool) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.down = on
}

func (is *Issuer) isDown() bool {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.down
}

// Issued is how many tokens were handed out.
func (is *Issuer) Issued() int64 { return is.issued.Load() }

// IssuedTo is how many tokens were handed out to subject (a client id, or
// the managed identity's).
func (is *Issuer) IssuedTo(subject string) int64 {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.issuedTo[subject]
}

// Close stops the issuer; its endpoints refuse connections afterwards.
func (is *Issuer) Close() { is.srv.Close() }

// audienceOf maps a scope to the audience of the token, as Entra ID does:
// "X/.default" gives X.
func audienceOf(scope string) string {
	first, _, _ := strings.Cut(strings.TrimSpace(scope), " ")
	return strings.TrimSuffix(first, "/.default")
}

func oauthError(w http.ResponseWriter, status int, code, desc string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": desc})
}

func (is *Issuer) token(w http.ResponseWriter, r *http.Request) {
	if is.isDown() {
		oauthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "the token endpoint is down")
		return
	}
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", "bad form")
		return
	}
	if r.PostForm.Get("grant_type") != "client_credentials" {
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "want client_credentials")
		return
	}
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	is.mu.Lock()
	want, known := is.clients[id]
	is.mu.Unlock()
	if !known || want != secret {
		oauthError(w, http.StatusUnauthorized, "invalid_client", "client authentication failed")
		return
	}
	scope := r.PostForm.Get("scope")
	if scope == "" {
		oauthError(w, http.StatusBadRequest, "invalid_scope", "a scope is required")
		return
	}
	tok, exp, err := is.sign(id, audienceOf(scope), map[string]any{"azp": id})
	if err != nil {
		oauthError(w, http.StatusInternalServerError, "server_error", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": int64(exp.Seconds())})
}

// msi answers the App Service managed identity protocol (api-version
// 2019-08-01): GET ?resource=...; header X-IDENTITY-HEADER.
func (is *Issuer) msi(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-IDENTITY-HEADER") != is.header {
		oauthError(w, http.StatusUnauthorized, "invalid_request", "missing X-IDENTITY-HEADER")
		return
	}
	resource := r.URL.Query().Get("resource")
	if resource == "" {
		oauthError(w, http.StatusBadRequest, "invalid_request", "resource is required")
		return
	}
	tok, life, err := is.sign(is.identity, audienceOf(resource), map[string]any{"appid": is.identity, "oid": "mi-object-id"})
	if err != nil {
		oauthError(w, http.StatusInternalServerError, "server_error", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"access_token": tok, "token_type": "Bearer", "resource": resource, "client_id": is.identity,
		"expires_on": strconv.FormatInt(time.Now().Add(life).Unix(), 10),
	})
}

// sign issues a token for subject and audience; it returns the token and
// the lifetime announced to the client.
func (is *Issuer) sign(subject, audience string, extra map[string]any) (string, time.Duration, error) {
	is.mu.Lock()
	life, expired := is.lifetime, is.expired
	is.mu.Unlock()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: is.key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", is.kid))
	if err != nil {
		return "", 0, err
	}
	now := time.Now()
	exp := now.Add(life)
	if expired {
		exp = now.Add(-time.Minute)
	}
	claims := jwt.Claims{
		Issuer: is.URL(), Subject: subject, Audience: jwt.Audience{audience},
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now.Add(-time.Minute)), Expiry: jwt.NewNumericDate(exp),
	}
	tok, err := jwt.Signed(signer).Claims(claims).Claims(extra).Serialize()
	if err != nil {
		return "", 0, err
	}
	is.issued.Add(1)
	is.mu.Lock()
	is.issuedTo[subject]++
	is.mu.Unlock()
	return tok, life, nil
}

func (is *Issuer) jwks(w http.ResponseWriter, _ *http.Request) {
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &is.key.PublicKey, KeyID: is.kid, Algorithm: string(jose.RS256), Use: "sig"}}}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(set)
}

// OAuthVerifier checks OAUTHBEARER authentications as a broker configured
// for an OIDC provider does: the JWT's signature against the provider's
// JWKS (fetched over HTTP, and again when a token names a key it does not
// hold), its issuer, audience and expiry, and the SASL extensions it
// requires.
type OAuthVerifier struct {
	// JWKSURL is fetched for every authentication.
	JWKSURL string
	// Issuer is the expected iss claim.
	Issuer string
	// Audience is the expected aud claim.
	Audience string
	// Extensions must be present with these values.
	Extensions map[string]string
	// Client fetches the JWKS; nil means http.DefaultClient.
	Client *http.Client

	mu   sync.Mutex
	keys *jose.JSONWebKeySet
}

// Mechanism implements Verifier.
func (v *OAuthVerifier) Mechanism() string { return "OAUTHBEARER" }

// Verify implements Verifier.
func (v *OAuthVerifier) Verify(auth []byte) (string, time.Time, error) {
	token, ext, err := ParseOAuthBearer(auth)
	if err != nil {
		return "", time.Time{}, err
	}
	var bad []string
	for _, k := range slices.Sorted(maps.Keys(v.Extensions)) {
		if ext[k] != v.Extensions[k] {
			bad = append(bad, fmt.Sprintf("%s: %q is not %q", k, ext[k], v.Extensions[k]))
		}
	}
	if len(bad) > 0 {
		return "", time.Time{}, &ExtensionsError{Invalid: bad}
	}
	return v.VerifyJWT(token)
}

// ExtensionsError is a refusal for missing or wrong SASL extensions. A
// Kafka broker answers it with an error code and a message (as
// OAuthBearerSaslServer throws SaslAuthenticationException), not with an
// OAUTHBEARER error challenge.
type ExtensionsError struct {
	Invalid []string
}

// Error returns Kafka's message.
func (e *ExtensionsError) Error() string {
	return fmt.Sprintf("Authentication failed: %d extensions are invalid! They are: %s", len(e.Invalid), strings.Join(e.Invalid, ", "))
}

// VerifyJWT checks a bearer token: signature against the JWKS, issuer,
// audience, expiry. It returns the subject and the expiry.
func (v *OAuthVerifier) VerifyJWT(token string) (string, time.Time, error) {
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		return "", time.Time{}, fmt.Errorf("not a JWT: %w", err)
	}
	kid := ""
	if len(tok.Headers) > 0 {
		kid = tok.Headers[0].KeyID
	}
	set, err := v.keySet(kid)
	if err != nil {
		return "", time.Time{}, err
	}
	var claims jwt.Claims
	if err := tok.Claims(set, &claims); err != nil {
		return "", time.Time{}, fmt.Errorf("signature: %w", err)
	}
	if err := claims.ValidateWithLeeway(jwt.Expected{Issuer: v.Issuer, AnyAudience: jwt.Audience{v.Audience}, Time: time.Now()}, 0); err != nil {
		return "", time.Time{}, fmt.Errorf("claims: %w", err)
	}
	if claims.Expiry == nil {
		return "", time.Time{}, errors.New("claims: no exp")
	}
	return claims.Subject, claims.Expiry.Time(), nil
}

// keySet returns the JWKS, fetching it when it is not held yet or lacks
// kid.
func (v *OAuthVerifier) keySet(kid string) (*jose.JSONWebKeySet, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.keys != nil && len(v.keys.Key(kid)) > 0 {
		return v.keys, nil
	}
	client := v.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Get(v.JWKSURL)
	if err != nil {
		return nil, fmt.Errorf("fetching JWKS: %w", err)
	}
	defer resp.Body.Close()
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		return nil, fmt.Errorf("decoding JWKS: %w", err)
	}
	v.keys = &set
	return v.keys, nil
}

// ParseOAuthBearer splits a client's first OAUTHBEARER message (RFC 7628
// §3.1) into its bearer token and extensions.
func ParseOAuthBearer(msg []byte) (string, map[string]string, error) {
	gs2, rest, ok := bytes.Cut(msg, []byte{1})
	if !ok || !bytes.HasPrefix(gs2, []byte("n,")) || !bytes.HasSuffix(gs2, []byte(",")) {
		return "", nil, errors.New("bad gs2 header")
	}
	if !bytes.HasSuffix(rest, []byte{1, 1}) && !bytes.Equal(rest, []byte{1}) {
		return "", nil, errors.New("message not ended by ^A^A")
	}
	ext := map[string]string{}
	token := ""
	for _, kv := range bytes.Split(bytes.TrimSuffix(rest, []byte{1, 1}), []byte{1}) {
		k, v, ok := bytes.Cut(kv, []byte("="))
		if !ok {
			return "", nil, fmt.Errorf("bad key/value %q", k)
		}
		if string(k) == "auth" {
			t, ok := strings.CutPrefix(string(v), "Bearer ")
			if !ok {
				return "", nil, errors.New("auth is not a Bearer token")
			}
			token = t
			continue
		}
		ext[string(k)] = string(v)
	}
	if token == "" {
		return "", nil, errors.New("no auth=Bearer")
	}
	return token, ext, nil
}
