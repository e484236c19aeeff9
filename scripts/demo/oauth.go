package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/ehmirror/ehmirror/config"
	"github.com/ehmirror/ehmirror/kafka/sasltest"
	"github.com/ehmirror/ehmirror/verify/kafkaconn"
)

// Demo over SASL/OAUTHBEARER (-oauth): Kafka sits behind a SASL front that
// accepts the mirror only with a JWT from a local OIDC issuer (client
// credentials), checked against the issuer's JWKS, with the audience and a
// Confluent-style logicalCluster extension, and ends every session after
// oauthSession, so the handler re-authenticates many times during the demo.
// The demo's own producer and verifier, which speak neither, log in with
// SASL PLAIN as a separate user.
const (
	oauthAudience  = "api://ehmirror-demo-kafka"
	oauthClientID  = "ehmirror-demo"
	oauthCluster   = "lkc-demo"
	oauthToolsUser = "demo-tools"
	oauthTokenLife = 3 * time.Second
	oauthSession   = 1 * time.Second
)

// oauthDemo is the issuer and the front of a demo over OAUTHBEARER.
type oauthDemo struct {
	issuer        *sasltest.Issuer
	front         *sasltest.Front
	secret        string
	toolsPassword string
}

func randomSecret() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// startOAuth starts the issuer; its kfake option puts the front before
// Kafka.
func startOAuth() (*oauthDemo, kfake.Opt, error) {
	is, err := sasltest.NewIssuer(oauthTokenLife)
	if err != nil {
		return nil, nil, err
	}
	d := &oauthDemo{issuer: is, secret: randomSecret(), toolsPassword: randomSecret()}
	is.AddClient(oauthClientID, d.secret)
	d.front = &sasltest.Front{
		Verifier: &sasltest.OAuthVerifier{
			JWKSURL: is.JWKSURL(), Issuer: is.URL(), Audience: oauthAudience,
			Extensions: map[string]string{"logicalCluster": oauthCluster},
		},
		SessionLifetime: oauthSession,
		Plain:           map[string]string{oauthToolsUser: d.toolsPassword},
	}
	return d, kfake.ListenFn(d.front.Listen), nil
}

func (d *oauthDemo) close() { d.issuer.Close() }

// tools is how the producer and the verifier log in.
func (d *oauthDemo) tools(c kafkaconn.Config) kafkaconn.Config {
	c.SASL, c.User, c.Password = "plain", oauthToolsUser, d.toolsPassword
	return c
}

// settings are the handler's OAUTHBEARER app settings.
func (d *oauthDemo) settings(s map[string]string) {
	s[config.KafkaSASLMechanism] = config.MechanismOAuthBearer
	s[config.KafkaOAuthTokenEndpoint] = d.issuer.TokenURL()
	s[config.KafkaOAuthClientID] = oauthClientID
	s[config.KafkaOAuthClientSecret] = d.secret
	s[config.KafkaOAuthScope] = oauthAudience + "/.default"
	s[config.KafkaOAuthExtensions] = "logicalCluster=" + oauthCluster
}

// summary says what the broker saw.
func (d *oauthDemo) summary() string {
	st := d.front.Stats()
	return fmt.Sprintf("Kafka authenticated the handler over OAUTHBEARER %d times (%d of them in-band re-authentications before %s sessions ended, %d sessions cut by the broker, %d refused); the issuer issued %d tokens of %s to %s",
		st.Authenticated, st.Reauthenticated, oauthSession, st.Expired, st.Refused, d.issuer.IssuedTo(oauthClientID), oauthTokenLife, oauthClientID)
}
