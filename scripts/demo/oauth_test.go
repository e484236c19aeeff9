package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDemoOverOAuthBearer runs the demo's seed scenario with -oauth: the
// real handler under the local Functions host gets JWTs from the local OIDC
// issuer with client credentials and re-authenticates its connections as
// the broker's 1 s sessions end; every record arrives once and in order,
// and GET /api/status shows the mechanism and the client id. (How many
// re-authentications happen depends on how long mirroring takes; the
// output says.)
func TestDemoOverOAuthBearer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var out bytes.Buffer
	oc, err := run(ctx, options{count: 2000, partitions: 2, maxRecords: 400, catchUpAfter: 1, seed: 23, oauth: true}, &out)
	t.Logf("demo output:\n%s", out.String())
	if err != nil {
		t.Fatalf("demo over OAUTHBEARER: %v", err)
	}
	tot := oc.report.Total()
	if !oc.report.OK() || tot.KafkaRecords != 2000 || tot.Events != 2000 || tot.Missing != 0 || tot.Duplicates != 0 || tot.OrderViolations != 0 || tot.Lag != 0 {
		t.Fatalf("report %+v: want 2000 records mirrored once, in order, lag 0", tot)
	}
	m := regexp.MustCompile(`OAUTHBEARER (\d+) times \((\d+) of them in-band re-authentications`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatal("the output does not say how often Kafka authenticated the handler")
	}
	if n, _ := strconv.Atoi(m[1]); n == 0 {
		t.Errorf("the handler never authenticated over OAUTHBEARER")
	}
	if !strings.Contains(out.String(), "kafka_auth: mechanism OAUTHBEARER, principal "+oauthClientID) {
		t.Errorf("the status does not show the mechanism and the client id")
	}
}
