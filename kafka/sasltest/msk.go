package sasltest

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	signer "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// AWS_MSK_IAM constants, from aws-msk-iam-auth's signed payload.
const (
	mskVersion = "2020_10_22"
	mskAction  = "kafka-cluster:Connect"
	mskService = "kafka-cluster"
	// emptySHA256 is the hex SHA-256 of an empty payload.
	emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
)

// MSKVerifier checks AWS_MSK_IAM authentications as MSK does: the signed
// payload's fields, and its SigV4 signature recomputed with aws-sdk-go-v2's
// signer from the credentials the verifier knows (fixed test keys, or
// temporary ones its STS stand-in issued).
type MSKVerifier struct {
	// Region is the cluster's region.
	Region string
	// Host, when set, must be the payload's host.
	Host string

	mu    sync.Mutex
	creds map[string]mskCreds // access key id
}

type mskCreds struct {
	aws.Credentials
	principal string
}

// AddCredentials makes the verifier accept signatures of c, as principal.
func (v *MSKVerifier) AddCredentials(c aws.Credentials, principal string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.creds == nil {
		v.creds = map[string]mskCreds{}
	}
	v.creds[c.AccessKeyID] = mskCreds{Credentials: c, principal: principal}
}

// Mechanism implements Verifier.
func (v *MSKVerifier) Mechanism() string { return "AWS_MSK_IAM" }

// Verify implements Verifier.
func (v *MSKVerifier) Verify(auth []byte) (string, time.Time, error) {
	var p map[string]string
	if err := json.Unmarshal(auth, &p); err != nil {
		return "", time.Time{}, fmt.Errorf("payload is not a JSON object of strings: %w", err)
	}
	for k, want := range map[string]string{"version": mskVersion, "action": mskAction, "x-amz-algorithm": "AWS4-HMAC-SHA256", "x-amz-signedheaders": "host"} {
		if p[k] != want {
			return "", time.Time{}, fmt.Errorf("%s is %q, want %q", k, p[k], want)
		}
	}
	if v.Host != "" && p["host"] != v.Host {
		return "", time.Time{}, fmt.Errorf("host is %q, want %q", p["host"], v.Host)
	}
	if p["user-agent"] == "" {
		return "", time.Time{}, errors.New("no user-agent")
	}
	cred := strings.Split(p["x-amz-credential"], "/")
	if len(cred) != 5 || cred[3] != mskService || cred[4] != "aws4_request" {
		return "", time.Time{}, fmt.Errorf("x-amz-credential %q malformed", p["x-amz-credential"])
	}
	if cred[2] != v.Region {
		return "", time.Time{}, fmt.Errorf("signed for region %s, the cluster is in %s", cred[2], v.Region)
	}
	v.mu.Lock()
	c, ok := v.creds[cred[0]]
	v.mu.Unlock()
	if !ok {
		return "", time.Time{}, fmt.Errorf("unknown access key %s", cred[0])
	}
	if c.SessionToken != p["x-amz-security-token"] {
		return "", time.Time{}, errors.New("x-amz-security-token does not match the credentials")
	}
	now := time.Now()
	if c.CanExpire && !now.Before(c.Expires) {
		return "", time.Time{}, errors.New("the credentials have expired")
	}
	signed, err := time.Parse("20060102T150405Z", p["x-amz-date"])
	if err != nil {
		return "", time.Time{}, fmt.Errorf("x-amz-date: %w", err)
	}
	secs, err := strconv.Atoi(p["x-amz-expires"])
	if err != nil || secs <= 0 || secs > 900 {
		return "", time.Time{}, fmt.Errorf("x-amz-expires %q out of range", p["x-amz-expires"])
	}
	expiry := signed.Add(time.Duration(secs) * time.Second)
	if signed.After(now.Add(5*time.Minute)) || !now.Before(expiry) {
		return "", time.Time{}, errors.New("the signature is not valid now")
	}
	if cred[1] != signed.Format("20060102") {
		return "", time.Time{}, errors.New("credential scope date differs from x-amz-date")
	}
	want, err := mskSignature(p["host"], secs, c.Credentials, v.Region, signed)
	if err != nil {
		return "", time.Time{}, err
	}
	if !hmac.Equal([]byte(want), []byte(p["x-amz-signature"])) {
		return "", time.Time{}, errors.New("signature mismatch")
	}
	if c.CanExpire && c.Expires.Before(expiry) {
		expiry = c.Expires
	}
	return c.principal, expiry, nil
}

// mskSignature presigns the request the AWS_MSK_IAM payload stands for
// with the same signer and returns its signature.
func mskSignature(host string, expires int, c aws.Credentials, region string, at time.Time) (string, error) {
	q := url.Values{"Action": {mskAction}, "X-Amz-Expires": {strconv.Itoa(expires)}}
	u := url.URL{Scheme: "kafka", Host: host, Path: "/", RawQuery: q.Encode()}
	req, err := http.NewRequest(http.MethodGet, u.String(), nil)
	if err != nil {
		return "", err
	}
	signedURL, _, err := signer.NewSigner().PresignHTTP(context.Background(), c, req, emptySHA256, mskService, region, at)
	if err != nil {
		return "", err
	}
	su, err := url.Parse(signedURL)
	if err != nil {
		return "", err
	}
	return su.Query().Get("X-Amz-Signature"), nil
}

// STS is an httptest stand-in for AWS STS's AssumeRoleWithWebIdentity
// (query protocol, XML answers): it checks the web identity token against
// an OIDC issuer (as an IAM OIDC provider does), and issues temporary
// credentials that its MSKVerifier accepts as the role.
type STS struct {
	srv      *httptest.Server
	roleARN  string
	token    *OAuthVerifier
	msk      *MSKVerifier
	lifetime time.Duration
	calls    atomic.Int64
}

// NewSTS starts an STS stand-in for roleARN, trusting tokens token accepts.
func NewSTS(roleARN string, token *OAuthVerifier, msk *MSKVerifier, lifetime time.Duration) *STS {
	s := &STS{roleARN: roleARN, token: token, msk: msk, lifetime: lifetime}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// URL is the endpoint (KAFKA_SASL_AWS_STS_ENDPOINT).
func (s *STS) URL() string { return s.srv.URL }

// Calls counts AssumeRoleWithWebIdentity calls.
func (s *STS) Calls() int64 { return s.calls.Load() }

// Close stops the stand-in.
func (s *STS) Close() { s.srv.Close() }

func (s *STS) fail(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, `<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type><Code>%s</Code><Message>%s</Message></Error><RequestId>sasltest</RequestId></ErrorResponse>`, code, xmlText(msg))
}

func xmlText(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

func (s *STS) serve(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.Method != http.MethodPost {
		s.fail(w, http.StatusBadRequest, "InvalidRequest", "want a POSTed form")
		return
	}
	if a := r.PostForm.Get("Action"); a != "AssumeRoleWithWebIdentity" {
		s.fail(w, http.StatusBadRequest, "InvalidAction", "unsupported action "+a)
		return
	}
	s.calls.Add(1)
	if arn := r.PostForm.Get("RoleArn"); arn != s.roleARN {
		s.fail(w, http.StatusForbidden, "AccessDenied", "Not authorized to perform sts:AssumeRoleWithWebIdentity on "+arn)
		return
	}
	if r.PostForm.Get("RoleSessionName") == "" {
		s.fail(w, http.StatusBadRequest, "ValidationError", "RoleSessionName is required")
		return
	}
	sub, _, err := s.token.VerifyJWT(r.PostForm.Get("WebIdentityToken"))
	if err != nil {
		s.fail(w, http.StatusBadRequest, "InvalidIdentityToken", "the web identity token is not valid: "+err.Error())
		return
	}
	exp := time.Now().Add(s.lifetime).UTC().Truncate(time.Second)
	c := aws.Credentials{AccessKeyID: "ASIA" + randomHex(8), SecretAccessKey: randomHex(20), SessionToken: randomHex(32), CanExpire: true, Expires: exp}
	s.msk.AddCredentials(c, s.roleARN)
	w.Header().Set("Content-Type", "text/xml")
	_, _ = fmt.Fprintf(w, `<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
<AssumeRoleWithWebIdentityResult>
<Credentials><AccessKeyId>%s</AccessKeyId><SecretAccessKey>%s</SecretAccessKey><SessionToken>%s</SessionToken><Expiration>%s</Expiration></Credentials>
<AssumedRoleUser><Arn>%s/%s</Arn><AssumedRoleId>AROATEST:%s</AssumedRoleId></AssumedRoleUser>
<SubjectFromWebIdentityToken>%s</SubjectFromWebIdentityToken>
</AssumeRoleWithWebIdentityResult>
<ResponseMetadata><RequestId>sasltest</RequestId></ResponseMetadata>
</AssumeRoleWithWebIdentityResponse>`, c.AccessKeyID, c.SecretAccessKey, c.SessionToken, exp.Format(time.RFC3339),
		xmlText(s.roleARN), xmlText(r.PostForm.Get("RoleSessionName")), xmlText(r.PostForm.Get("RoleSessionName")), xmlText(sub))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return strings.ToUpper(hex.EncodeToString(b))
}
