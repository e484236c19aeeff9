// Command bench measures the mirror's throughput beside the Kafka-read and
// Event-Hubs-send limits of the same machine (issue 7), prints a table and
// writes .bench/latest.json. `make bench` runs it; -quick is a smoke run.
//
// main only wires flags to package bench; the same binary, re-executed with
// a child spec in its environment, measures one phase.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ehmirror/ehmirror/bench"
	"github.com/ehmirror/ehmirror/mirror"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	spec, err := bench.ChildSpecFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	if spec != nil {
		return bench.RunChild(ctx, *spec, os.Stdout, logger)
	}

	var cfg bench.Config
	var cases, profile, out, results string
	var tables bool
	flag.BoolVar(&cfg.Quick, "quick", false, "smoke run: 2,000 records per case, one round, few samples")
	flag.IntVar(&cfg.Rounds, "rounds", 0, "rounds of read, send, parallel and mirror per case; the median round counts (default 3, quick 1)")
	flag.Int64Var(&cfg.Records, "records", 0, "records per case (0: size each case for -seconds of mirroring)")
	flag.Float64Var(&cfg.Seconds, "seconds", 10, "target seconds of each case's mirror drain when -records is 0")
	flag.StringVar(&cases, "cases", "", "comma-separated case names to run (default all: 100B-keyless,100B-keyed,1KiB-keyless,1KiB-keyed,10KiB-keyless,10KiB-keyed,1KiB-far,1KiB-tls,latency,quota,scale-out,1x1000,200-topics; on request also 100B-headers,1KiB-headers)")
	var lc bench.LatencyConfig
	var qc bench.QuotaConfig
	var quotaUnits, quotaSizes, quotaPartitioning string
	flag.BoolVar(&qc.Deduplicate, "quota-deduplicate", false, "quota case: MIRROR_DEDUPLICATE=true")
	flag.StringVar(&quotaPartitioning, "quota-partitioning", "hash", "quota case: MIRROR_PARTITIONING (hash, kafka-murmur2, preserve, round-robin)")
	flag.StringVar(&quotaSizes, "quota-sizes", "100,1024", "quota case: value sizes in bytes (keyed records)")
	flag.StringVar(&quotaUnits, "quota-units", "1,2", "quota case: namespace sizes in throughput units")
	flag.DurationVar(&qc.Period, "quota-period", 100*time.Millisecond, "quota case: the emulator grants a unit's 1 MiB or 1,000 events per this period (compressed time; 1s is real time)")
	flag.Float64Var(&qc.BacklogMinutes, "quota-backlog-minutes", 3, "quota case: the backlog in minutes of quota")
	var cc bench.ClusterConfig
	flag.Int64Var(&cc.PerPartition, "cluster-records", 300, "1x1000 and 200-topics cases: backlog records (1 KiB keyed) per partition")
	flag.DurationVar(&cc.Idle, "cluster-idle", 60*time.Second, "1x1000 and 200-topics cases: how long the handler follows an idle cluster after the catch-up")
	var follow, scaleProcesses string
	var sc bench.ScaleConfig
	flag.StringVar(&scaleProcesses, "scale-processes", "1,2,4", "scale-out case: handler process counts to run, in order")
	flag.BoolVar(&sc.Ticks, "scale-ticks", false, "scale-out case: fire every process's timer together, the next tick when all invocations ended (default: each again as soon as its own ends)")
	flag.Int64Var(&sc.PerPartition, "scale-records", 100_000, "scale-out case: backlog records (1 KiB) per partition of the 20")
	flag.IntVar(&lc.Rate, "latency-rate", 20000, "latency case: records per second (1 KiB, keyed)")
	flag.DurationVar(&lc.Duration, "latency-duration", 60*time.Second, "latency case: how long the producer writes")
	flag.StringVar(&lc.Schedule, "latency-schedule", "", "latency case: MIRROR_SCHEDULE (default the project's, every minute)")
	flag.StringVar(&follow, "latency-follow", "false,true", "latency case: MIRROR_FOLLOW values to run, in order")
	flag.IntVar(&lc.Runs, "latency-runs", 1, "latency case: consecutive runs per MIRROR_FOLLOW value (each a row of its own)")
	flag.StringVar(&profile, "profile", "", "comma-separated case names whose mirror phase is CPU-profiled (read, send and mirror phases, child and infra) into .bench/cpu-CASE-PHASE[-infra].pprof")
	flag.IntVar(&cfg.IdleDrains, "idle", 0, "idle drains timed per case (default 5, quick 2; -1 none)")
	flag.IntVar(&cfg.StartSamples, "starts", 0, "handler start-to-ready samples (default 7, quick 3; -1 none)")
	flag.Int64Var(&cfg.MaxBacklogBytes, "max-backlog-bytes", 0, "cap on one case's backlog in value bytes (default 2 GiB)")
	flag.StringVar(&cfg.HandlerBinary, "handler", "", "a built handler binary (default: build ./handler into .bench)")
	flag.StringVar(&out, "out", "", "JSON output (default .bench/latest.json in the repository)")
	flag.StringVar(&results, "results", "", "also write the run's JSON, trimmed, to this file (bench/results/NAME.json, to commit and quote in a generated table)")
	flag.BoolVar(&tables, "tables", false, "rewrite the generated tables of docs/performance.md from the bench/results/ files their markers name, and exit (runs nothing)")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	if tables {
		return writeTables()
	}

	for v := range strings.SplitSeq(follow, ",") {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("-latency-follow: %q is not true or false", v)
		}
		lc.Follow = append(lc.Follow, b)
	}
	for v := range strings.SplitSeq(quotaUnits, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 || n > 40 {
			return fmt.Errorf("-quota-units: %q is not a number of throughput units 1..40", v)
		}
		qc.Units = append(qc.Units, n)
	}
	for v := range strings.SplitSeq(quotaSizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			return fmt.Errorf("-quota-sizes: %q is not a size in bytes", v)
		}
		name := strconv.Itoa(n) + "B-keyed"
		if n%1024 == 0 {
			name = strconv.Itoa(n/1024) + "KiB-keyed"
		}
		qc.Shapes = append(qc.Shapes, bench.Shape{Name: name, Size: n, Keyed: true})
	}
	for v := range strings.SplitSeq(scaleProcesses, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			return fmt.Errorf("-scale-processes: %q is not a process count", v)
		}
		sc.Processes = append(sc.Processes, n)
	}
	if qc.Partitioning, err = mirror.ParsePartitioning(quotaPartitioning); err != nil {
		return fmt.Errorf("-quota-partitioning: %w", err)
	}
	if cases == "" {
		cfg.Far, cfg.TLS, cfg.Latency, cfg.Quota, cfg.Scale, cfg.Cluster = true, true, &lc, &qc, &sc, &cc
		for _, name := range []string{"1x1000", "200-topics"} {
			layouts, _ := bench.ClusterLayouts(name)
			cc.Layouts = append(cc.Layouts, layouts...)
		}
	} else {
		all := map[string]bench.Shape{}
		for _, s := range append(bench.DefaultShapes(), bench.HeaderShapes()...) {
			all[s.Name] = s
		}
		for name := range strings.SplitSeq(cases, ",") {
			switch name = strings.TrimSpace(name); name {
			case "1KiB-far":
				cfg.Far = true
				continue
			case "1KiB-tls":
				cfg.TLS = true
				continue
			case "latency":
				cfg.Latency = &lc
				continue
			case "quota":
				cfg.Quota = &qc
				continue
			case "scale-out":
				cfg.Scale = &sc
				continue
			}
			if layouts, ok := bench.ClusterLayouts(name); ok {
				cc.Layouts = append(cc.Layouts, layouts...)
				cfg.Cluster = &cc
				continue
			}
			s, ok := all[name]
			if !ok {
				return fmt.Errorf("-cases: unknown case %q", name)
			}
			cfg.Shapes = append(cfg.Shapes, s)
		}
		if len(cfg.Shapes) == 0 {
			cfg.Shapes = []bench.Shape{} // only the extra cases
		}
	}
	if profile != "" {
		cfg.Profile = strings.Split(profile, ",")
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))

	res, err := bench.Run(ctx, cfg)
	if res != nil && (len(res.Cases) > 0 || len(res.Conditions) > 0 || len(res.Latency) > 0 || len(res.Quota) > 0 || len(res.Scale) > 0 || len(res.Cluster) > 0) {
		if perr := res.PrintTable(os.Stdout); perr != nil {
			err = errors.Join(err, perr)
		}
		if perr := bench.PrintQuotaTable(os.Stdout, res.Quota); perr != nil {
			err = errors.Join(err, perr)
		}
		if out == "" {
			wd, werr := os.Getwd()
			if werr != nil {
				return errors.Join(err, werr)
			}
			root, rerr := bench.ModuleRoot(wd)
			if rerr != nil {
				return errors.Join(err, rerr)
			}
			out = filepath.Join(root, ".bench", "latest.json")
		}
		if werr := res.WriteJSON(out); werr != nil {
			err = errors.Join(err, werr)
		} else {
			cfg.Logger.Info("wrote " + out)
		}
		if results != "" {
			if werr := res.WriteTrimmedJSON(results); werr != nil {
				err = errors.Join(err, werr)
			} else {
				cfg.Logger.Info("wrote " + results)
			}
		}
	}
	return err
}

// writeTables rewrites the generated tables of bench.TableDocs in the
// repository this runs in.
func writeTables() error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	root, err := bench.ModuleRoot(wd)
	if err != nil {
		return err
	}
	read := func(path string) ([]byte, error) { return os.ReadFile(filepath.Join(root, filepath.FromSlash(path))) }
	for _, doc := range bench.TableDocs {
		path := filepath.Join(root, filepath.FromSlash(doc))
		old, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		text, err := bench.GenerateTables(old, read)
		if err != nil {
			return fmt.Errorf("%s: %w", doc, err)
		}
		if err := os.WriteFile(path, text, 0o644); err != nil {
			return err
		}
	}
	return nil
}
