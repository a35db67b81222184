package leaderelection_test

import (
	"context"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/hashicorp/go-hclog"

	"github.com/loomrt/loom/certs"
	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/dial"
	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/leaderelection"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// The main of a controller process run as N replicas against a Loom host:
// the replicas elect a leader on the lease resource "my-controllers", and
// only the leader runs the singleton controllers. It is what
// docs/operations.md shows ("Remote controllers"), with the example
// controllers standing in for yours.
func Example() {
	conn, err := dial.Dial("loom.example:8502",
		dial.WithTLS(certs.Files{CA: "ca.pem"}),
		dial.WithToken(os.Getenv("LOOM_TOKEN")))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	client := pbresource.NewResourceServiceClient(conn)
	logger := hclog.New(&hclog.LoggerOptions{Name: "my-controllers"})

	// Each replica campaigns under an identity of its own.
	hostname, _ := os.Hostname()
	lease, err := leaderelection.New(client, &pbresource.ID{Name: "my-controllers"},
		hostname+"-"+resource.NewULID(), leaderelection.WithLogger(logger.Named("lease")))
	if err != nil {
		log.Fatal(err)
	}
	mgr, err := controller.NewManager(client, logger, controller.WithLease(lease))
	if err != nil {
		log.Fatal(err)
	}
	if err := foo.RegisterControllers(mgr); err != nil {
		log.Fatal(err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The election outlives the Manager: the lease is released only once
	// the controllers have stopped, and then another replica takes over
	// at once.
	electionCtx, stopElection := context.WithCancel(context.Background())
	elected := make(chan struct{})
	go func() {
		defer close(elected)
		if err := lease.Run(electionCtx); err != nil {
			log.Fatal(err) // the server does not know loom.v1.Lease
		}
	}()
	if err := mgr.Run(ctx); err != nil { // until SIGTERM
		log.Print(err)
	}
	stopElection()
	<-elected
}
