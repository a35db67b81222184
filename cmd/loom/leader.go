package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/loomrt/loom/certs"
	"github.com/loomrt/loom/internal/daemon"
)

// leaderScrapeTimeout bounds each server's answer to `loom leader`.
const leaderScrapeTimeout = 5 * time.Second

// leaderSampleRE matches a loom_leader sample of Prometheus's text format.
var leaderSampleRE = regexp.MustCompile(`^loom_leader\{lease="((?:[^"\\]|\\.)*)"\} (\S+)$`)

func runLeader(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("loom leader", flag.ContinueOnError)
	fs.SetOutput(stderr)
	caFile := fs.String("http-ca", "", "`file` of PEM CA certificates for servers whose HTTP endpoints serve TLS (-http-tls); the system's roots when empty")
	tokenFile := fs.String("http-token-file", "", "`file` holding the token of the servers' -http-token-file")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: loom leader [flags] HTTP-ADDR...\n\n"+
			"Asks each server (or remote controller process) at its HTTP address (host:port, or\n"+
			"https://host:port with -http-tls) which leases it holds, from the loom_leader gauge\n"+
			"of its /metrics, and prints one line per lease and server. Exit status 1 when no\n"+
			"server that answered leads.\n\nFlags:\n")
		fs.PrintDefaults()
		fmt.Fprintf(stderr, "\nExamples:\n  loom leader 10.0.0.1:8501 10.0.0.2:8501 10.0.0.3:8501\n"+
			"  loom leader -http-ca ca.pem -http-token-file metrics.token https://loom-1:8501 https://loom-2:8501\n")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{Err: err}
	}
	if fs.NArg() == 0 {
		return usagef("leader needs the HTTP address of each server (e.g. 127.0.0.1:8501)")
	}
	client, token, err := leaderClient(*caFile, *tokenFile)
	if err != nil {
		return err
	}
	defer client.CloseIdleConnections()
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tLEASE\tLEADS")
	leaders := 0
	for _, addr := range fs.Args() {
		leases, err := scrapeLeader(ctx, client, addr, token)
		if err != nil {
			fmt.Fprintf(tw, "%s\t-\terror: %v\n", addr, err)
			continue
		}
		for _, l := range leases {
			leads := "no"
			if l.held {
				leads, leaders = "yes", leaders+1
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", addr, l.name, leads)
		}
	}
	tw.Flush()
	if leaders == 0 {
		return errors.New("no server that answered leads")
	}
	return nil
}

// leaderClient is the HTTP client of `loom leader` and the token it sends.
func leaderClient(caFile, tokenFile string) (*http.Client, string, error) {
	var token string
	if tokenFile != "" {
		var err error
		if token, err = daemon.ReadToken("http-token-file", tokenFile); err != nil {
			return nil, "", err
		}
	}
	var tlsCfg *tls.Config
	if caFile != "" {
		var err error
		if tlsCfg, err = certs.ClientConfig(certs.Files{CA: caFile}); err != nil {
			return nil, "", fmt.Errorf("-http-ca: %w", err)
		}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}, Timeout: leaderScrapeTimeout}, token, nil
}

// leaseState is one loom_leader sample.
type leaseState struct {
	name string
	held bool
}

// scrapeLeader reads the loom_leader samples of the server at addr.
func scrapeLeader(ctx context.Context, client *http.Client, addr, token string) ([]leaseState, error) {
	url := addr
	if !strings.Contains(addr, "://") {
		url = "http://" + addr
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(url, "/")+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rsp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer rsp.Body.Close()
	if rsp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics answered %s (give -http-token-file if it wants a token)", rsp.Status)
	}
	var leases []leaseState
	sc := bufio.NewScanner(rsp.Body)
	for sc.Scan() {
		if m := leaderSampleRE.FindStringSubmatch(sc.Text()); m != nil {
			leases = append(leases, leaseState{name: m[1], held: m[2] == "1"})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(leases) == 0 {
		return nil, errors.New("no loom_leader metric: not the HTTP address of a Loom server, nor of a remote controller process with leader election")
	}
	return leases, nil
}
