package main

import (
	"github.com/ehmirror/ehmirror/functions/appbuild"

	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/ehmirror/ehmirror/config"
	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/mirror"
	"github.com/ehmirror/ehmirror/scripts/produce/randmsg"
	"github.com/ehmirror/ehmirror/verify"
	"github.com/ehmirror/ehmirror/verify/kafkaconn"
)

// options are the demo's knobs (flags in main).
type options struct {
	// count messages are produced, the seed's 10,000 by default.
	count int
	// partitions of every topic and hub.
	partitions int
	// maxRecords is MIRROR_MAX_RECORDS: records per drain, so that the
	// timer runs several times.
	maxRecords int
	// catchUpAfter timer runs, one catch-up is started through
	// POST /api/catchup; 0 starts none.
	catchUpAfter int
	// seed of the random topic choice; 0 = random.
	seed uint64
	// root is the repository (module) root; "" finds it from the working
	// directory.
	root string
	// terminal enables in-place progress lines.
	terminal bool
	// mtls, when set, makes Kafka require a client certificate, and the
	// producer, the handler and the verifier present one.
	mtls *mutualTLS
	// oauth runs Kafka behind an OAUTHBEARER front and the handler with
	// OIDC client credentials (oauth.go).
	oauth bool
}

// mutualTLS is Kafka with mutual TLS: the broker's TLS configuration (it
// requires and verifies client certificates) and what the clients need, in
// PEM.
type mutualTLS struct {
	Broker      *tls.Config
	CAPEM       []byte // the broker certificate's CA
	CertPEM     []byte // the client certificate
	KeyPEM      []byte // its key, encrypted when KeyPassword is set
	KeyPassword string
}

// kafkaConn is how the demo's producer and verifier reach Kafka: the
// cluster's addresses and, with mutual TLS, the files written to dir.
func (o options) kafkaConn(brokers []string, dir string) (kafkaconn.Config, error) {
	c := kafkaconn.Config{Brokers: brokers}
	if o.mtls == nil {
		return c, nil
	}
	c.TLS, c.KeyPassword = true, o.mtls.KeyPassword
	for _, f := range []struct {
		path *string
		name string
		pem  []byte
	}{{&c.CAFile, "ca.pem", o.mtls.CAPEM}, {&c.CertFile, "client.pem", o.mtls.CertPEM}, {&c.KeyFile, "client.key", o.mtls.KeyPEM}} {
		*f.path = filepath.Join(dir, f.name)
		if err := os.WriteFile(*f.path, f.pem, 0o600); err != nil {
			return c, fmt.Errorf("writing %s: %w", f.name, err)
		}
	}
	return c, c.Validate()
}

// stuckRuns is how many timer runs in a row may leave the lag where it was
// before the demo gives up.
const stuckRuns = 5

// outcome is what a demo run produced.
type outcome struct {
	report   *verify.Report
	mirrored time.Duration
}

// run is the whole demo. It stops everything it started before returning.
func run(ctx context.Context, o options, out io.Writer) (*outcome, error) {
	started := time.Now()
	p := &printer{w: out, terminal: o.terminal}
	root := o.root
	if root == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		if root, err = appbuild.ModuleRoot(wd); err != nil {
			return nil, err
		}
	}
	work, err := os.MkdirTemp("", "ehmirror-demo-")
	if err != nil {
		return nil, fmt.Errorf("creating a work folder: %w", err)
	}
	defer os.RemoveAll(work)
	appDir := filepath.Join(work, "app")
	logPath := filepath.Join(work, "handler.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating the handler log: %w", err)
	}
	defer logFile.Close()

	p.line("ehmirror demo: the seed's 10,000-message test, mirrored from an embedded Kafka into the Event Hubs")
	p.line("emulator by the real handler binary under a local Functions host, then verified through the Event Hubs SDK.")
	p.line("")

	// The handler build is the slowest step on a fresh clone: start it now.
	buildCtx, cancelBuild := context.WithCancel(ctx)
	var buildErr error
	built := make(chan struct{})
	go func() {
		defer close(built)
		buildErr = appbuild.Build(buildCtx, root, appDir)
	}()
	defer func() {
		cancelBuild()
		<-built
	}()

	topics := randmsg.TopicNames(randmsg.DefaultTopicBase, randmsg.DefaultTopics)
	p.step(1, "Starting Kafka (kfake) and the Event Hubs emulator")
	var kopts []kfake.Opt
	if o.mtls != nil {
		kopts = append(kopts, kfake.TLS(o.mtls.Broker))
	}
	var oauth *oauthDemo
	if o.oauth {
		var front kfake.Opt
		if oauth, front, err = startOAuth(); err != nil {
			return nil, err
		}
		defer oauth.close()
		kopts = append(kopts, front)
	}
	loc, err := startLocal(ctx, topics, o.partitions, kopts...)
	if err != nil {
		return nil, err
	}
	defer loc.close()
	conn, err := o.kafkaConn(loc.kafka.ListenAddrs(), work)
	if err != nil {
		return nil, err
	}
	if oauth != nil {
		conn = oauth.tools(conn)
		p.line("      Kafka requires SASL/OAUTHBEARER: a JWT from a local OIDC issuer (%s), audience %s, extension logicalCluster=%s;", oauth.issuer.URL(), oauthAudience, oauthCluster)
		p.line("      sessions end after %s (connections.max.reauth.ms), tokens live %s; producer and verifier log in with PLAIN", oauthSession, oauthTokenLife)
	}
	if o.mtls != nil {
		p.line("      Kafka requires TLS client certificates (mutual TLS); producer, handler and verifier present one")
	}
	p.line("      Kafka        %s  topics %s..%s, %d partitions each", loc.brokers(), topics[0], topics[len(topics)-1], o.partitions)
	p.line("      Event Hubs   %s  hubs   %s..%s, %d partitions each", loc.hubs.Addr(), topics[0], topics[len(topics)-1], o.partitions)

	p.step(2, fmt.Sprintf("Producing %d messages the seed's way (random topic; every 2nd keyed with one of 100 keys, every 4th with headers)", o.count))
	res, err := randmsg.Produce(ctx, conn, randmsg.Options{
		Count: o.count, Keys: 100, KeyEvery: 2, Headers: true, HeaderEvery: 4, Seed: o.seed,
		Out: out, EchoLimit: 5,
		Progress: func(n int) { p.progress("      produced %d/%d", n, o.count) },
	})
	if err != nil {
		return nil, fmt.Errorf("producing: %w", err)
	}
	p.done("      produced %d messages in %s (%.0f msg/s, seed %d)", res.Written, round(res.Duration), res.Rate(), res.Seed)

	p.step(3, "Building the function app (go build ./handler; host.json; MirrorTimer, CatchUp, Status)")
	buildStart := time.Now()
	<-built
	if buildErr != nil {
		return nil, fmt.Errorf("building the function app: %w", buildErr)
	}
	p.line("      %s (%s)", appDir, round(time.Since(buildStart)))

	settings, err := loadSettings(filepath.Join(root, "local.settings.json.example"))
	if err != nil {
		return nil, err
	}
	settings[config.KafkaBrokers] = loc.brokers()
	settings[config.EventHubsConnection] = loc.hubs.ConnectionString()
	settings[config.MirrorMaxRecords] = strconv.Itoa(o.maxRecords)
	if o.mtls != nil {
		settings[config.KafkaTLS] = "true"
		settings[config.KafkaTLSCAPEM] = string(o.mtls.CAPEM)
		settings[config.KafkaTLSCertPEM] = string(o.mtls.CertPEM)
		settings[config.KafkaTLSKeyPEM] = string(o.mtls.KeyPEM)
		settings[config.KafkaTLSKeyPassword] = o.mtls.KeyPassword
	}
	if oauth != nil {
		oauth.settings(settings)
	}
	p.step(4, "Starting the handler through the local Functions host")
	p.line("      app settings: local.settings.json.example with KAFKA_BROKERS=%s, EVENTHUBS=<the emulator>,", loc.brokers())
	p.line("      MIRROR_MAX_RECORDS=%d (so that one timer run mirrors at most %d records)", o.maxRecords, o.maxRecords)
	hostStart := time.Now()
	a, err := startApp(ctx, appDir, settings, logFile)
	if err != nil {
		return nil, withLogTail(err, logPath)
	}
	defer a.stop()
	p.line("      handler ready in %s (readiness probe GET /); functions at %s/api/status and %s/api/catchup", round(time.Since(hostStart)), a.base, a.base)

	p.step(5, "Mirroring: firing MirrorTimer until the consumer group's lag is 0")
	mirrored, err := mirrorAll(ctx, a, o, p)
	if err != nil {
		return nil, withLogTail(err, logPath)
	}

	if oauth != nil {
		p.line("      %s", oauth.summary())
		st, err := a.status(ctx, "")
		if err != nil {
			return nil, err
		}
		if st.KafkaAuth == nil {
			return nil, errors.New("GET /api/status has no kafka_auth")
		}
		p.line("      GET /api/status kafka_auth: mechanism %s, principal %s, token expires %s", st.KafkaAuth.Mechanism, st.KafkaAuth.Principal, st.KafkaAuth.TokenExpiry.Format(time.RFC3339))
	}

	p.step(6, "Verifying through the Event Hubs SDK (every record against every event, by provenance)")
	rep, err := verifyCopy(ctx, loc, conn, settings, p)
	if err != nil {
		return nil, err
	}
	p.line("")
	rate := verify.Column{Header: "mirrored/s", Value: func(t verify.TopicResult) string {
		return strconv.FormatFloat(float64(t.Events)/mirrored.Seconds(), 'f', 0, 64)
	}}
	if err := rep.WriteTable(out, rate); err != nil {
		return nil, err
	}
	if err := rep.WriteFindings(out); err != nil {
		return nil, err
	}
	p.line("%s", rep.Verdict())
	oc := &outcome{report: rep, mirrored: mirrored}
	if !rep.OK() {
		return oc, errors.New("the copy in Event Hubs does not match Kafka")
	}
	p.line("demo passed in %s; stopping everything.", round(time.Since(started)))
	return oc, nil
}

// mirrorAll fires MirrorTimer, reads the lag from GET /api/status, and
// repeats until the lag is 0; after catchUpAfter timer runs it starts one
// catch-up through POST /api/catchup and follows it to its end. It returns
// the time taken.
func mirrorAll(ctx context.Context, a *app, o options, p *printer) (time.Duration, error) {
	start := time.Now()
	best, stuck := int64(-1), 0
	for run := 1; ; run++ {
		summary, err := a.fireTimer(ctx)
		if err != nil {
			return 0, err
		}
		lag, err := a.lag(ctx)
		if err != nil {
			return 0, err
		}
		p.line("      MirrorTimer #%d: %s; GET /api/status: lag %d", run, strings.TrimPrefix(summary, "timer drain: "), lag)
		if lag == 0 {
			break
		}
		if best >= 0 && lag >= best {
			if stuck++; stuck == stuckRuns {
				return 0, fmt.Errorf("the lag stayed at %d for %d timer runs", lag, stuckRuns)
			}
		} else {
			best, stuck = lag, 0
		}
		if run == o.catchUpAfter {
			if err := catchUp(ctx, a, p); err != nil {
				return 0, err
			}
		}
	}
	took := time.Since(start)
	p.line("      lag 0 after %s", round(took))
	return took, nil
}

// catchUp starts a catch-up and polls its status until it ends.
func catchUp(ctx context.Context, a *app, p *printer) error {
	id, statusURL, err := a.startCatchUp(ctx)
	if err != nil {
		return err
	}
	p.line("      POST /api/catchup: run %s started", id)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		st, err := a.status(ctx, statusURL)
		if err != nil {
			return err
		}
		if st.Run == nil {
			return fmt.Errorf("GET /api/status?run=%s: no such run", id)
		}
		r := st.Run
		if r.State == mirror.CatchUpRunning {
			if r.Drains > 0 {
				p.progress("      catch-up %s: running, %d drains, %d records, lag %d", r.ID, r.Drains, r.Records, r.Lag)
			}
			continue
		}
		p.done("      catch-up %s: %s after %d drains, %d records, lag %d", r.ID, r.State, r.Drains, r.Records, r.Lag)
		if r.State != mirror.CatchUpCaughtUp {
			return fmt.Errorf("catch-up %s ended %s: %s", r.ID, r.State, r.LastError)
		}
		return nil
	}
}

// verifyCopy runs the verifier with the app's settings and asks for zero
// duplicates and zero lag.
func verifyCopy(ctx context.Context, loc *local, conn kafkaconn.Config, settings map[string]string, p *printer) (*verify.Report, error) {
	s, problems := config.Load(func(name string) string { return settings[name] })
	if len(problems) > 0 {
		return nil, problems
	}
	return verify.Run(ctx, verify.Config{
		Kafka:            conn,
		EventHubs:        verify.EventHubs{ConnectionString: loc.hubs.ConnectionString()},
		Topics:           s.Topics,
		Routes:           s.Routes,
		Partitioning:     s.Partitioning,
		Group:            s.KafkaGroup,
		FailOnDuplicates: true,
		FailOnPending:    true,
		IdleTimeout:      20 * time.Second,
		Progress: func(pr verify.Progress) {
			what := "Kafka records"
			if pr.Phase == "eventhubs" {
				what = "Event Hubs events"
			}
			p.progress("      read %d/%d %s", pr.Done, pr.Total, what)
		},
	})
}

// local is the embedded Kafka and the emulator, on free loopback ports.
type local struct {
	kafka *kfake.Cluster
	hubs  *emulator.Server
}

func startLocal(ctx context.Context, topics []string, partitions int, kopts ...kfake.Opt) (*local, error) {
	kc, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(int32(partitions), topics...)}, kopts...)...)
	if err != nil {
		return nil, fmt.Errorf("starting Kafka: %w", err)
	}
	hubs := make([]emulator.HubConfig, len(topics))
	for i, t := range topics {
		hubs[i] = emulator.HubConfig{Name: t, PartitionCount: partitions}
	}
	srv, err := emulator.Start(ctx, emulator.Config{Listen: "127.0.0.1:0", Hubs: hubs})
	if err != nil {
		kc.Close()
		return nil, fmt.Errorf("starting the Event Hubs emulator: %w", err)
	}
	return &local{kafka: kc, hubs: srv}, nil
}

func (l *local) brokers() string { return strings.Join(l.kafka.ListenAddrs(), ",") }

func (l *local) close() {
	l.hubs.Close()
	l.kafka.Close()
}

// withLogTail adds the last lines of the handler's log to err.
func withLogTail(err error, path string) error {
	f, ferr := os.Open(path)
	if ferr != nil {
		return err
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > 20 {
			lines = lines[1:]
		}
	}
	if len(lines) == 0 {
		return err
	}
	return fmt.Errorf("%w\nlast lines of the handler and host log:\n  %s", err, strings.Join(lines, "\n  "))
}

func round(d time.Duration) time.Duration {
	if d > 10*time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

// printer writes the demo's lines; progress lines are rewritten in place on
// a terminal and thinned out elsewhere.
type printer struct {
	w        io.Writer
	terminal bool
	pending  bool // a progress line is on screen
	last     time.Time
}

func (p *printer) line(format string, args ...any) {
	p.clear()
	fmt.Fprintf(p.w, format+"\n", args...)
}

func (p *printer) step(n int, text string) { p.line("[%d/6] %s", n, text) }

// progress shows a transient line, at most every 100 ms on a terminal and
// every 2 s elsewhere.
func (p *printer) progress(format string, args ...any) {
	every := 2 * time.Second
	if p.terminal {
		every = 100 * time.Millisecond
	}
	if time.Since(p.last) < every {
		return
	}
	p.last = time.Now()
	if p.terminal {
		fmt.Fprintf(p.w, "\r\033[K"+format, args...)
		p.pending = true
		return
	}
	fmt.Fprintf(p.w, format+"\n", args...)
}

// done replaces the progress line with a final one.
func (p *printer) done(format string, args ...any) { p.line(format, args...) }

func (p *printer) clear() {
	if p.pending {
		fmt.Fprint(p.w, "\r\033[K")
		p.pending = false
	}
}
