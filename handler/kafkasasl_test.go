package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/ehmirror/ehmirror/config"
	"github.com/ehmirror/ehmirror/kafka"
	"github.com/ehmirror/ehmirror/kafka/sasltest"
)

// TestKafkaSASLFromSettings builds the Kafka source from app settings as
// the handler does, against brokers that check OAUTHBEARER (local OIDC
// issuer) and AWS_MSK_IAM (fixed keys): the right settings list the topics;
// each wrong one fails in one line naming the app setting, without the
// secret, and the source's Auth (status kafka_auth) says so too.
func TestKafkaSASLFromSettings(t *testing.T) {
	is, err := sasltest.NewIssuer(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(is.Close)
	is.AddClient("mirror", "oidc-secret-value")
	oauthFront := &sasltest.Front{Verifier: &sasltest.OAuthVerifier{JWKSURL: is.JWKSURL(), Issuer: is.URL(), Audience: "api://kafka", Extensions: map[string]string{"logicalCluster": "lkc-1"}}}
	mskVerifier := &sasltest.MSKVerifier{Region: "eu-west-1"}
	mskVerifier.AddCredentials(aws.Credentials{AccessKeyID: "AKIATEST", SecretAccessKey: "aws-secret-value"}, "user/mirror")
	mskFront := &sasltest.Front{Verifier: mskVerifier}
	brokers := map[*sasltest.Front]string{}
	for _, f := range []*sasltest.Front{oauthFront, mskFront} {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "prod.a"), kfake.ListenFn(f.Listen))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		brokers[f] = c.ListenAddrs()[0]
	}
	oidc := func(extra map[string]string) map[string]string {
		m := map[string]string{
			config.KafkaBrokers: brokers[oauthFront], config.KafkaSASLMechanism: "oauthbearer",
			config.KafkaOAuthTokenEndpoint: is.TokenURL(), config.KafkaOAuthClientID: "mirror", config.KafkaOAuthClientSecret: "oidc-secret-value",
			config.KafkaOAuthScope: "api://kafka/.default", config.KafkaOAuthExtensions: "logicalCluster=lkc-1",
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	msk := func(extra map[string]string) map[string]string {
		m := map[string]string{
			config.KafkaBrokers: brokers[mskFront], config.KafkaSASLMechanism: "aws-msk-iam", config.KafkaAWSRegion: "eu-west-1",
			config.KafkaAWSAccessKeyID: "AKIATEST", config.KafkaAWSSecretAccessKey: "aws-secret-value",
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	for _, c := range []struct {
		name     string
		env      map[string]string
		setting  string // "" = must work
		mechName string
	}{
		{"oidc", oidc(nil), "", "OAUTHBEARER"},
		{"oidc-wrong-secret", oidc(map[string]string{config.KafkaOAuthClientSecret: "wrong-secret-value"}), config.KafkaOAuthClientSecret, "OAUTHBEARER"},
		{"oidc-wrong-scope", oidc(map[string]string{config.KafkaOAuthScope: "api://other/.default"}), config.KafkaOAuthScope, "OAUTHBEARER"},
		{"oidc-endpoint-down", oidc(map[string]string{config.KafkaOAuthTokenEndpoint: "http://127.0.0.1:1/token"}), config.KafkaOAuthTokenEndpoint, "OAUTHBEARER"},
		{"msk", msk(nil), "", "AWS_MSK_IAM"},
		{"msk-wrong-secret", msk(map[string]string{config.KafkaAWSSecretAccessKey: "wrong-secret-value"}), config.KafkaAWSSecretAccessKey, "AWS_MSK_IAM"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.env[config.MirrorSchedule] = config.DefaultSchedule
			c.env[config.EventHubsConnection] = "Endpoint=sb://127.0.0.1:5672;SharedAccessKeyName=k;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true"
			s, problems := config.Load(func(k string) string { return c.env[k] })
			if len(problems) > 0 {
				t.Fatal(problems)
			}
			sasl, err := kafkaSASL(s.SASL)
			if err != nil {
				t.Fatal(err)
			}
			src, err := kafka.NewSource(kafka.Options{Brokers: s.KafkaBrokers, Group: "g", SASL: sasl})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err = src.Topics(ctx)
			auth := src.Auth()
			if auth.Mechanism != c.mechName {
				t.Errorf("Auth().Mechanism = %q, want %s", auth.Mechanism, c.mechName)
			}
			if c.setting == "" {
				if err != nil || auth.LastError != "" || auth.TokenExpiry.IsZero() {
					t.Fatalf("Topics: %v; Auth %+v", err, auth)
				}
				return
			}
			if err == nil {
				t.Fatal("Topics succeeded")
			}
			line := err.Error()
			t.Logf("%s", line)
			for _, got := range []string{line, auth.LastError} {
				if !strings.Contains(got, c.setting+":") || strings.Contains(got, "\n") || strings.Contains(got, "secret-value") {
					t.Errorf("%q: want one line naming %s, without a secret", got, c.setting)
				}
			}
		})
	}
}
