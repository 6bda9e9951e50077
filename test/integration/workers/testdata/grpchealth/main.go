// Command grpchealth is a grpc.health.v1 server for the grpc probe tests:
// it serves on the address of its first argument (default :9090), SERVING
// for the server ("") until the file of its second argument (default
// /tmp/unhealthy) exists, then NOT_SERVING. It exits on SIGTERM.
package main

import (
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	grpchealth "google.golang.org/grpc/health/grpc_health_v1"
)

func main() {
	addr, flag := ":9090", "/tmp/unhealthy"
	if len(os.Args) > 1 {
		addr = os.Args[1]
	}
	if len(os.Args) > 2 {
		flag = os.Args[2]
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	grpchealth.RegisterHealthServer(srv, hs)
	go func() {
		for {
			st := grpchealth.HealthCheckResponse_SERVING
			if _, err := os.Stat(flag); err == nil {
				st = grpchealth.HealthCheckResponse_NOT_SERVING
			}
			hs.SetServingStatus("", st)
			time.Sleep(100 * time.Millisecond)
		}
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		srv.Stop()
	}()
	log.Printf("grpc health server on %s", lis.Addr())
	if err := srv.Serve(lis); err != nil {
		log.Fatal(err)
	}
}
