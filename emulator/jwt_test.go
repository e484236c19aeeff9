package emulator

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/emulator/amqp"
)

// signJWT makes an Entra ID style token; a nil key gives alg "none" and no
// signature.
func signJWT(t testing.TB, key *rsa.PrivateKey, claims map[string]any) string {
	t.Helper()
	alg := "none"
	if key != nil {
		alg = "RS256"
	}
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	signed := enc(map[string]string{"alg": alg, "typ": "JWT"}) + "." + enc(claims)
	if key == nil {
		return signed + "."
	}
	sum := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func publicKeyPEM(t testing.TB, key *rsa.PrivateKey) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

func entraClaims(oid string, expires time.Time) map[string]any {
	return map[string]any{"aud": "https://eventhubs.azure.net", "oid": oid, "exp": expires.Unix(), "nbf": time.Now().Add(-time.Minute).Unix(),
		"iss": "https://sts.windows.net/tenant/"}
}

// rawPutToken runs one put-token on a fresh session of channel ch (the $cbs
// links are detached afterwards) and returns the status and description.
func (r *rawConn) rawPutToken(ch uint16, tokenType, token, audience string) (int64, string) {
	r.t.Helper()
	r.begin(ch)
	r.attach(ch, "cbs", 0, amqp.RoleSender, &amqp.Source{}, &amqp.Target{Address: "$cbs"})
	r.attach(ch, "cbs-reply", 1, amqp.RoleReceiver, &amqp.Source{Address: "$cbs"}, &amqp.Target{Address: "cbs-reply"})
	r.credit(ch, 1, 1)
	r.request(ch, 0, 0, putTokenRequest("put", "cbs-reply", tokenType, token, audience))
	_, payload := r.rawTransfer()
	code, desc, _ := rpcStatus(r.t, payload)
	r.write(amqp.FrameTypeAMQP, ch, &amqp.End{}, nil)
	rawNext[*amqp.End](r)
	return code, desc
}

// rawAttachError attaches a producer (receive=false) or a consumer of
// partition 0 of $Default on channel ch and returns the refusal, or nil.
func (r *rawConn) rawAttachError(ch uint16, hubName string, receive bool) *amqp.Error {
	r.t.Helper()
	r.begin(ch)
	var a *amqp.Attach
	if receive {
		a = r.attach(ch, "recv", 0, amqp.RoleReceiver, &amqp.Source{Address: hubName + "/ConsumerGroups/$Default/Partitions/0"}, &amqp.Target{})
	} else {
		a = r.attach(ch, "send", 0, amqp.RoleSender, &amqp.Source{}, &amqp.Target{Address: hubName})
	}
	if a.Source != nil || a.Target != nil {
		return nil
	}
	d := rawNext[*amqp.Detach](r)
	if d.Error == nil {
		r.t.Fatalf("refusal without an error: %+v", d)
	}
	return d.Error
}

// TestEntraIDTokensAndRoles: Entra ID tokens (type jwt) are accepted next
// to SAS tokens on the same emulator; rights come from role assignments per
// principal (oid), on the namespace or one hub.
func TestEntraIDTokensAndRoles(t *testing.T) {
	t.Parallel()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, Config{Hubs: prodHubs(), EntraID: EntraID{
		SigningKeys: []string{publicKeyPEM(t, key)},
		RoleAssignments: []RoleAssignment{
			{Principal: "sender-oid", Role: RoleDataSender},
			{Principal: "receiver-oid", Role: RoleDataReceiver, Hub: "prod.test2"},
			{Principal: "owner-oid", Role: RoleDataOwner},
		},
	}})
	aud := func(hub string) string { return "amqp://" + srv.Addr() + "/" + hub }
	type step struct {
		name     string
		token    string
		hub      string
		receive  bool
		wantCode int64
		wantDesc string // put-token description or attach refusal
	}
	soon := time.Now().Add(time.Hour)
	steps := []step{
		{"sender sends", signJWT(t, key, entraClaims("sender-oid", soon)), "prod.test1", false, 202, ""},
		{"sender cannot receive", signJWT(t, key, entraClaims("sender-oid", soon)), "prod.test1", true, 202, "Unauthorized access. 'Listen' claim(s) are required to perform this operation."},
		{"receiver receives on its hub", signJWT(t, key, entraClaims("receiver-oid", soon)), "prod.test2", true, 202, ""},
		{"receiver cannot send", signJWT(t, key, entraClaims("receiver-oid", soon)), "prod.test2", false, 202, "Unauthorized access. 'Send' claim(s) are required to perform this operation."},
		{"receiver has no role on another hub", signJWT(t, key, entraClaims("receiver-oid", soon)), "prod.test3", true, 202, "'Listen' claim(s) are required"},
		{"owner sends", signJWT(t, key, entraClaims("owner-oid", soon)), "prod.test4", false, 202, ""},
		{"owner receives", signJWT(t, key, entraClaims("owner-oid", soon)), "prod.test4", true, 202, ""},
		{"unknown principal", signJWT(t, key, entraClaims("stranger", soon)), "prod.test1", false, 202, "'Send' claim(s) are required"},
		{"other key", signJWT(t, other, entraClaims("owner-oid", soon)), "prod.test1", false, 401, "InvalidSignature"},
		{"unsigned", signJWT(t, nil, entraClaims("owner-oid", soon)), "prod.test1", false, 401, "InvalidSignature"},
		{"expired", signJWT(t, key, entraClaims("owner-oid", time.Now().Add(-time.Minute))), "prod.test1", false, 401, "ExpiredToken: The token is expired. Expiration time: '"},
		{"SAS at the same time", sasToken(aud("prod.test5"), DefaultKeyName, DefaultKey, soon), "prod.test5", false, 202, ""},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			r := dialRaw(t, srv.Addr())
			r.open()
			typ := "jwt"
			if strings.HasPrefix(st.token, "SharedAccessSignature") {
				typ = "servicebus.windows.net:sastoken"
			}
			code, desc := r.rawPutToken(0, typ, st.token, aud(st.hub))
			if code != st.wantCode || (code != 202 && !strings.Contains(desc, st.wantDesc)) {
				t.Fatalf("put-token: %d %q, want %d %q", code, desc, st.wantCode, st.wantDesc)
			}
			if code != 202 {
				return
			}
			e := r.rawAttachError(1, st.hub, st.receive)
			switch {
			case st.wantDesc == "" && e != nil:
				t.Fatalf("attach refused: %v", e)
			case st.wantDesc != "" && (e == nil || e.Condition != "amqp:unauthorized-access" || !strings.Contains(e.Description, st.wantDesc)):
				t.Fatalf("attach: %+v, want amqp:unauthorized-access %q", e, st.wantDesc)
			}
		})
	}
}

// TestEntraIDUnsignedFromLoopback: with TrustUnsignedFromLoopback an
// unsigned token from 127.0.0.1 is accepted (roles still apply).
func TestEntraIDUnsignedFromLoopback(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{Hubs: prodHubs(), EntraID: EntraID{TrustUnsignedFromLoopback: true,
		RoleAssignments: []RoleAssignment{{Principal: "mi-oid", Role: RoleDataSender, Hub: "prod.test1"}}}})
	r := dialRaw(t, srv.Addr())
	r.open()
	code, desc := r.rawPutToken(0, "jwt", signJWT(t, nil, entraClaims("mi-oid", time.Now().Add(time.Hour))), "amqp://"+srv.Addr()+"/prod.test1")
	if code != 202 {
		t.Fatalf("put-token: %d %q", code, desc)
	}
	if e := r.rawAttachError(1, "prod.test1", false); e != nil {
		t.Fatalf("attach: %v", e)
	}
	if e := r.rawAttachError(2, "prod.test1", true); e == nil || !strings.Contains(e.Description, "'Listen' claim(s)") {
		t.Fatalf("receive attach: %+v", e)
	}
}
