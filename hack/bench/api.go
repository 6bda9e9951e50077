package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// apiResult is the API-under-load section.
type apiResult struct {
	pods, clients int
	duration      time.Duration
	// createBatch is the time of each RunPods batch, ms.
	createBatch sample
	get, list   loadResult
	listBytes   int
	// RSS of podsyncd with the pods running, before and after the load,
	// and its peak (VmHWM) at the end.
	rssBefore, rssAfter, hwm int64
	profiles                 []string
	errs                     []string
}

// rss is podsyncd's RSS with the pods running, for the target: NaN when
// it was not read (the section skipped or failed before it), so no
// verdict is given on a figure that was never measured.
func (a *apiResult) rss() float64 {
	if a.rssBefore <= 0 {
		return math.NaN()
	}
	return float64(a.rssBefore)
}

// loadResult is one call's latencies under load.
type loadResult struct {
	lat   []float64 // ms
	calls int
	errs  int
	first string // the first error
	wall  time.Duration
}

func (l *loadResult) p(q float64) float64 { return quantile(l.lat, q) }

// apiLoad runs pods pods (RunPods in batches), then drives GetPod and then
// ListPods from clients concurrent clients, each on its own connection,
// for duration each.
func (b *bench) apiLoad(ctx context.Context, e *env, pods, batch, clients int, duration time.Duration) *apiResult {
	res := &apiResult{pods: pods, clients: clients, duration: duration}
	if err := b.measureAPI(ctx, e, res, batch); err != nil {
		res.errs = append(res.errs, err.Error())
		b.log.Error("api load", zap.Error(err))
	}
	if err := e.cleanAll(ctx); err != nil {
		res.errs = append(res.errs, "cleanup: "+err.Error())
	}
	return res
}

// measureAPI creates res.pods pods, then measures GetPod and ListPods
// under load and podsyncd's memory before and after it, with CPU and heap
// profiles when -profile-dir is set.
func (b *bench) measureAPI(ctx context.Context, e *env, res *apiResult, batch int) error {
	names, err := b.createAPIPods(ctx, e, res, batch)
	if err != nil {
		return err
	}
	// Let the statuses that follow RunPods settle.
	time.Sleep(time.Second)
	if res.rssBefore, _, err = procMemory(e.d.PID); err != nil {
		return err
	}
	list, err := e.d.api.ListPods(ctx, &podsyncv1.ListPodsRequest{})
	if err != nil {
		return fmt.Errorf("ListPods: %w", err)
	}
	if len(list.GetPods()) != res.pods {
		return fmt.Errorf("ListPods returned %d pods, want %d", len(list.GetPods()), res.pods)
	}
	res.listBytes = proto.Size(list)

	conns, closeConns, err := dialLoadClients(ctx, e, res.clients, names)
	if err != nil {
		return err
	}
	defer closeConns()
	b.driveLoad(ctx, e, res, conns, names)
	if res.rssAfter, res.hwm, err = procMemory(e.d.PID); err != nil {
		return err
	}
	if b.cfg.profileDir != "" {
		path := filepath.Join(b.cfg.profileDir, fmt.Sprintf("heap-%dpods.pprof", res.pods))
		if err := e.d.profile(ctx, "heap", 0, path); err != nil {
			res.errs = append(res.errs, err.Error())
		} else {
			res.profiles = append(res.profiles, path)
		}
	}
	return nil
}

// createAPIPods runs res.pods pods, batch pods per RunPods, and records
// each batch's time in res. With -profile-dir the creation is profiled;
// the profile holds RunPods work only, as it ends before the load starts
// (a CPU profile has no samples while podsyncd idles). It returns the
// pods' names.
func (b *bench) createAPIPods(ctx context.Context, e *env, res *apiResult, batch int) ([]string, error) {
	var createProfile chan error
	if b.cfg.profileDir != "" {
		path := filepath.Join(b.cfg.profileDir, fmt.Sprintf("runpods-create-%dpods.pprof", res.pods))
		createProfile = make(chan error, 1)
		go func() { createProfile <- e.d.profile(ctx, "profile", 20, path) }()
		res.profiles = append(res.profiles, path)
		time.Sleep(100 * time.Millisecond)
	}
	var names []string
	for left := res.pods; left > 0; left -= batch {
		pods := newPods("api", min(batch, left))
		e.noteUIDs(uidsOf(pods)...)
		req, err := runPodsRequest(pods)
		if err != nil {
			return nil, err
		}
		start := time.Now()
		done, err := e.d.runPods(ctx, req)
		if err != nil {
			res.createBatch.fail(err)
			return nil, fmt.Errorf("create pods: %w", err)
		}
		res.createBatch.add(msOf(done.Sub(start)))
		for _, p := range pods {
			names = append(names, p.Name)
		}
		b.log.Info("api: pods running", zap.Int("pods", len(names)))
	}
	if createProfile != nil {
		if err := <-createProfile; err != nil {
			res.errs = append(res.errs, err.Error())
		}
	}
	return names, nil
}

// dialLoadClients opens n connections to podsyncd and returns a client on
// each that has already called GetPod of the first pod of names, so that
// the load's clock starts on connected clients. The returned func closes the connections;
// on error they are closed already.
func dialLoadClients(ctx context.Context, e *env, n int, names []string) (_ []podsyncv1.PodSyncServiceClient, closeConns func(), err error) {
	var opened []*grpc.ClientConn
	closeConns = func() {
		for _, conn := range opened {
			_ = conn.Close()
		}
	}
	defer func() {
		if err != nil {
			closeConns()
		}
	}()
	clients := make([]podsyncv1.PodSyncServiceClient, n)
	for i := range clients {
		conn, err := grpc.NewClient("unix://"+e.d.sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)))
		if err != nil {
			return nil, nil, err
		}
		opened = append(opened, conn)
		clients[i] = podsyncv1.NewPodSyncServiceClient(conn)
		// Connect before the clock starts.
		if _, err := clients[i].GetPod(ctx, &podsyncv1.GetPodRequest{Namespace: benchNamespace, Name: names[0]}); err != nil {
			return nil, nil, fmt.Errorf("GetPod: %w", err)
		}
	}
	return clients, closeConns, nil
}

// driveLoad drives GetPod of random pods of names, then ListPods, from
// every client for res.duration each, into res.get and res.list; with
// -profile-dir each load is profiled.
func (b *bench) driveLoad(ctx context.Context, e *env, res *apiResult, clients []podsyncv1.PodSyncServiceClient, names []string) {
	calls := []struct {
		name string
		out  *loadResult
		call func(ctx context.Context, c podsyncv1.PodSyncServiceClient, r *rand.Rand) error
	}{
		{"getpod", &res.get, func(ctx context.Context, c podsyncv1.PodSyncServiceClient, r *rand.Rand) error {
			_, err := c.GetPod(ctx, &podsyncv1.GetPodRequest{Namespace: benchNamespace, Name: names[r.IntN(len(names))]})
			return err
		}},
		{"listpods", &res.list, func(ctx context.Context, c podsyncv1.PodSyncServiceClient, _ *rand.Rand) error {
			_, err := c.ListPods(ctx, &podsyncv1.ListPodsRequest{})
			return err
		}},
	}
	for _, c := range calls {
		var perr chan error
		if b.cfg.profileDir != "" {
			path := filepath.Join(b.cfg.profileDir, fmt.Sprintf("%s-%dpods.pprof", c.name, res.pods))
			perr = make(chan error, 1)
			go func() { perr <- e.d.profile(ctx, "profile", int(res.duration/time.Second), path) }()
			res.profiles = append(res.profiles, path)
		}
		*c.out = drive(ctx, clients, res.duration, c.call)
		if perr != nil {
			if err := <-perr; err != nil {
				res.errs = append(res.errs, err.Error())
			}
		}
		b.log.Info("api: load done", zap.String("call", c.name), zap.Int("calls", c.out.calls),
			zap.String("p50", fmtMS(c.out.p(0.5))), zap.String("p99", fmtMS(c.out.p(0.99))))
	}
}

// drive calls call from one goroutine per client, back to back, for d.
func drive(ctx context.Context, clients []podsyncv1.PodSyncServiceClient, d time.Duration,
	call func(context.Context, podsyncv1.PodSyncServiceClient, *rand.Rand) error) loadResult {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var out loadResult
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(i), 42))
			lat := make([]float64, 0, 4096)
			var errs int
			var first error
			for time.Now().Before(deadline) && ctx.Err() == nil {
				t := time.Now()
				cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
				err := call(cctx, c, r)
				ccancel()
				if err != nil {
					errs++
					if first == nil {
						first = err
					}
					continue
				}
				lat = append(lat, msOf(time.Since(t)))
			}
			mu.Lock()
			out.lat = append(out.lat, lat...)
			out.calls += len(lat)
			out.errs += errs
			if first != nil && out.first == "" {
				out.first = first.Error()
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	out.wall = time.Since(start)
	slices.Sort(out.lat)
	return out
}
