package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/ehmirror/ehmirror/config"
	"github.com/ehmirror/ehmirror/eventhubs"
	"github.com/ehmirror/ehmirror/functions"
	"github.com/ehmirror/ehmirror/kafka"
	"github.com/ehmirror/ehmirror/metrics"
	"github.com/ehmirror/ehmirror/mirror"
)

// app holds what the routes use: the settings, their problems, and, when the
// settings are valid, the mirror service with its clients. Clients are made
// once per process and reused by every invocation.
type app struct {
	settings config.Settings
	problems config.Problems
	// unknownSettings are environment names that look like settings
	// (KAFKA_*, MIRROR_*, …) but are not: most likely misspelt ones,
	// whose values are ignored. They do not stop the mirror.
	unknownSettings config.Problems
	logger          *slog.Logger
	redactor        *redactor

	source  *kafka.Source
	sink    *eventhubs.Sink
	service *mirror.Service
	// runs shares catch-up runs with the other instances, instances what
	// each instance runs and ran.
	runs      *mirror.RunBoard
	instances *mirror.InstanceBoard

	// cutover is where POST /api/cutover writes checkpoints; its problems
	// concern that route only.
	cutover         config.Cutover
	cutoverProblems config.Problems
	// metrics are the OpenTelemetry metrics (OTLP when configured, and
	// GET /api/metrics); nil when they could not be set up.
	metrics *metrics.Metrics
	// loaded is when the settings were read (the process started with
	// them): when their problems started.
	loaded time.Time
}

// newApp loads the settings and, if they are valid, builds the clients. It
// never fails: problems are kept and reported by every invocation.
func newApp(getenv func(string) string, logger *slog.Logger, r *redactor) *app {
	loaded := time.Now()
	s, problems := config.Load(getenv)
	if root := getenv(functions.EnvAppRoot); root != "" {
		if hc, err := functions.LoadHostConfig(root); err != nil {
			logger.Warn("reading host.json to check the drain budget", "err", err)
		} else if p := s.CheckBudget(hc.FunctionTimeout); p != nil {
			problems = append(problems, *p)
		}
	}
	a := &app{settings: s, problems: problems, logger: logger, redactor: r, loaded: loaded}
	a.cutover, a.cutoverProblems = config.LoadCutover(getenv)
	if len(problems) > 0 {
		return a
	}
	if err := a.connect(); err != nil {
		a.problems = append(a.problems, config.NewProblem("(clients)", r.Redact(err.Error())))
		return a
	}
	m, err := metrics.New(context.Background(), a.service, getenv)
	if err != nil {
		a.problems = append(a.problems, config.NewProblem("OTEL_EXPORTER_OTLP_*", r.Redact(err.Error())))
		return a
	}
	a.metrics = m
	m.ReadWith(a.reading)
	return a
}

func (a *app) connect() error {
	s := a.settings
	tlsConfig, err := s.KafkaTLSConfig()
	if err != nil {
		return err
	}
	sasl, err := kafkaSASL(s.SASL)
	if err != nil {
		return err
	}
	a.source, err = kafka.NewSource(kafka.Options{
		Brokers:        s.KafkaBrokers,
		Group:          s.KafkaGroup,
		TLS:            tlsConfig,
		SASL:           sasl,
		SessionTimeout: s.KafkaSessionTimeout,
		Logger:         a.logger,
	})
	if err != nil {
		return err
	}
	sinkOpts := eventhubs.Options{ConnectionString: s.EventHubsConnectionString, Logger: a.logger}
	if s.EventHubsConnectionString == "" {
		sinkOpts.FullyQualifiedNamespace = s.EventHubsNamespace
		if sinkOpts.Credential, err = credential(s.EventHubsClientID); err != nil {
			return err
		}
	}
	if a.sink, err = eventhubs.NewSink(sinkOpts); err != nil {
		return err
	}
	m, err := mirror.New(a.source, a.sink, mirror.Options{
		Topics:         s.Topics,
		Routes:         s.Routes,
		Partitioning:   s.Partitioning,
		StartOffset:    s.StartOffset,
		GapPolicy:      s.GapPolicy,
		OversizePolicy: s.OversizePolicy,
		InFlightBytes:  s.InFlightBytes,
		Deduplicate:    s.Deduplicate,
		Logger:         a.logger,
		Control:        a.source,

		CatchUpMaxDuration: s.CatchUpMaxDuration,
	})
	if err != nil {
		return err
	}
	a.service = mirror.NewService(m, s.Limits)
	a.runs = mirror.NewRunBoard(m)
	a.instances = mirror.NewInstanceBoard(m)
	return nil
}

// credential follows the Functions identity-based connection convention: a
// user-assigned managed identity when a client id is given, otherwise the
// default chain (the app's system-assigned identity in Azure, the developer's
// az login locally).
func credential(clientID string) (azcore.TokenCredential, error) {
	if clientID != "" {
		c, err := azidentity.NewManagedIdentityCredential(&azidentity.ManagedIdentityCredentialOptions{ID: azidentity.ClientID(clientID)})
		if err != nil {
			return nil, fmt.Errorf("managed identity %s: %w", config.EventHubsClientID, err)
		}
		return c, nil
	}
	c, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		return nil, fmt.Errorf("default Azure credential: %w", err)
	}
	return c, nil
}

// Close stops a running catch-up (it commits what was acknowledged) and
// closes the clients.
func (a *app) Close(ctx context.Context) {
	if a.service != nil {
		a.service.Close()
	}
	if a.metrics != nil {
		if err := a.metrics.Shutdown(ctx); err != nil {
			a.logger.Warn("flushing metrics", "err", err)
		}
	}
	if a.sink != nil {
		if err := a.sink.Close(ctx); err != nil {
			a.logger.Warn("closing Event Hubs producers", "err", err)
		}
	}
	if a.source != nil {
		if err := a.source.Close(); err != nil {
			a.logger.Warn("closing Kafka clients", "err", err)
		}
	}
}
