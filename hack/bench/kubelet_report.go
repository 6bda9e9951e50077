package main

import (
	"fmt"
	"math"
	"strings"
)

// kubeletFailed reports whether a kubelet row of fr has failures.
func (fr *flavourResult) kubeletFailed() bool {
	for _, rr := range fr.runs {
		if len(rr.kubelet.errs) > 0 {
			return true
		}
	}
	if fr.restart != nil && (len(fr.restart.errs) > 0 || len(fr.restart.kubelet.errs) > 0) {
		return true
	}
	if fr.idle != nil {
		if len(fr.idle.errs) > 0 {
			return true
		}
		for _, row := range fr.idle.rows() {
			if row.err != "" {
				return true
			}
		}
	}
	return false
}

// Pods-to-running target against the kubelet, at N ≥ 10.
const targetRunVsKubelet = 0.85

// renderKubeletTargets renders the target rows of the kubelet
// comparison: pods to running, restart after a stop, the idle node.
func renderKubeletTargets(w *strings.Builder, res *results) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	if res.kubeletErr != "" {
		p("| the kubelet comparison | FAILED: %s | ❌ |\n", oneLine(res.kubeletErr))
	}
	for _, fr := range res.flavours {
		for _, rr := range fr.runs {
			if rr.n == 1 {
				p("| RunPods ÷ kubelet, N = 1, containerd %s (shown, no target) | %s | — |\n", flavourName(fr.flavour),
					medianOr(&rr.kubeletRatio, "%.2f"))
				continue
			}
			m, v := roundTarget(&rr.kubeletRatio, "%.2f", targetRunVsKubelet)
			p("| RunPods ÷ kubelet, N = %d, containerd %s: ≤ %.2f | %s | %s |\n", rr.n, flavourName(fr.flavour), targetRunVsKubelet, m, v)
		}
	}
	for _, fr := range res.flavours {
		if r := fr.restart; r != nil {
			ratio := r.podsync.median() / r.kubelet.median()
			p("| restart after an external stop, podsync ÷ kubelet (medians), containerd %s: ≤ 1/5 | %s | %s |\n",
				flavourName(fr.flavour), ratioOr(ratio, r.podsync.ok() && r.kubelet.ok()), verdict(ratio, targetRestartVsKubelet))
		}
	}
	for _, fr := range res.flavours {
		r := fr.idle
		if r == nil {
			continue
		}
		ps, kl, large := r.podsyncd, r.kubelet, r.large
		both := ps != nil && kl != nil && ps.measuredOK && kl.measuredOK
		cpu, rss, sumPS, sumKL := math.NaN(), math.NaN(), math.NaN(), math.NaN()
		if both {
			cpu = ps.agentCPU / kl.agentCPU
			rss = float64(ps.rss) / float64(kl.rss)
			sumPS, sumKL = ps.agentCPU+ps.ctrdCPU+ps.shimCPU, kl.agentCPU+kl.ctrdCPU+kl.shimCPU
		}
		p("| idle node, %d pods: podsyncd CPU ÷ kubelet CPU ≤ 1/4, containerd %s | %s | %s |\n", idlePods, flavourName(fr.flavour),
			ratioOr(cpu, both), verdict(cpu, targetIdleCPUVsKubelet))
		p("| idle node, %d pods: podsyncd RSS ÷ kubelet RSS ≤ 1/2, containerd %s | %s | %s |\n", idlePods, flavourName(fr.flavour),
			ratioOr(rss, both), verdict(rss, targetIdleRSSVsKubelet))
		sum := "—"
		if both {
			sum = fmt.Sprintf("%.3f vs %.3f CPU-s/min", sumPS, sumKL)
		}
		v := "—"
		if both {
			v = "✅ within"
			if sumPS >= sumKL {
				v = "❌ over"
			}
		}
		p("| idle node, %d pods: podsyncd + containerd + shims < kubelet + containerd + shims, containerd %s | %s | %s |\n",
			idlePods, flavourName(fr.flavour), sum, v)
		if large != nil {
			core := math.NaN()
			if large.measuredOK {
				core = large.agentCPU / 60
			}
			p("| idle node, %d pods: podsyncd ≤ 0.5 %% of one core, containerd %s | %s | %s |\n", idlePodsLarge, flavourName(fr.flavour),
				pctOr(core), verdict(core, targetIdleLargeCore))
		}
	}
}

func ratioOr(v float64, ok bool) string {
	if !ok || math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf("%.2f", v)
}

func pctOr(core float64) string {
	if math.IsNaN(core) {
		return "—"
	}
	return fmt.Sprintf("%.3f %% of a core", core*100)
}

// renderKubeletMethod renders how the kubelet was built and run.
func renderKubeletMethod(w *strings.Builder, res *results, cfg config) {
	if !cfg.sections["run"] && !cfg.sections["restart"] && !cfg.sections["idle"] {
		return
	}
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	v := res.kubeletVersion
	if v == "" {
		v = "(none: " + oneLine(res.kubeletErr) + ")"
	}
	p("## How the kubelet was built and run\n\n")
	p("- **Build:** %s, built from the Go module proxy by `hack/kube/build.sh kubelet` (a scratch module that\n"+
		"  requires `k8s.io/kubernetes %s` and replaces each staging module by its published `v0.x` release,\n"+
		"  version stamped with `-ldflags -X`; `go install` refuses the module's replace directives), run by\n"+
		"  the bench itself (so from `make bench`) unless `-kubelet PATH` names one.\n", v, kubeletVersion)
	p("- **Configuration:** standalone, static pods only, no kubeconfig; the kubelet's default configuration —\n" +
		"  QoS cgroups on (`cgroupsPerQOS` left at its default, true: each pod in `<cgroupRoot>/kubepods/besteffort/pod<uid>`,\n" +
		"  as podsyncd's `/kubepods/besteffort/pod<uid>`), generic PLEG relisting every 1 s, housekeeping every\n" +
		"  2 s — with `cgroupDriver: cgroupfs` (the v1beta1 default, named),\n" +
		"  `failCgroupV1: false`, `failSwapOn: false`, `seccompDefault: true` (the one setting that changes the pods:\n" +
		"  as podsyncd's default, so the containers are the same), `resolvConf: \"\"` (as podsyncd's `--resolv-conf=`), its own root dir,\n" +
		"  cert dir, `podLogsDir`, `volumePluginDir`, free ports on 127.0.0.1 (healthz and the kubelet port,\n" +
		"  `readOnlyPort: 0`), `makeIPTablesUtilChains: false`, anonymous authentication with `AlwaysAllow`, and\n" +
		"  disk eviction and image GC thresholds out of reach (`evictionHard` memory 100Mi, nodefs/imagefs 1%%;\n" +
		"  `imageGCHighThresholdPercent: 100`): this host's disk is fuller than the defaults allow, and the kubelet\n" +
		"  would evict the pods measured and delete the runtime's images. Config: `kubeletConfig` in\n" +
		"  `hack/bench/kubelet.go`.\n")
	p("- **Isolation:** it runs under `unshare -m --propagation slave`, with files holding the current values\n" +
		"  bind-mounted over `/proc/sys/{vm/overcommit_memory,vm/panic_on_oom,kernel/panic,kernel/panic_on_oops,\n" +
		"  kernel/keys/root_maxkeys,kernel/keys/root_maxbytes}` (its kernel tunables change nothing on the host)\n" +
		"  and a directory of the run over `/var/log/containers`; `cgroupRoot: /podsync-bench-<token>` (a random\n" +
		"  token per start) keeps its QoS and pod cgroups, and the orphan cleanup that kills pod cgroups it does\n" +
		"  not know (it scans only `<cgroupRoot>/kubepods/{,burstable/,besteffort/}`), away from `/kubepods`,\n" +
		"  where podsyncd and other tests on the host keep theirs. The tree is removed when it stops.\n")
	p("- **Lifecycle:** podsyncd is stopped before the kubelet starts and restarted after it stops (each removes\n" +
		"  pods it does not know), then warmed up as at the start (one untimed RunPods of two pods): the first\n" +
		"  RunPods of a fresh process pays one-time costs a running node agent does not. The kubelet is ready when `/healthz` answers ok, its log says the sync loop\n" +
		"  started, its PLEG relisted (`kubelet_pleg_relist_duration_seconds_count` ≥ 1) and its first\n" +
		"  housekeeping is due, and then 5 s more for its start-up work (first stats, GC scans) to pass; it\n" +
		"  runs only while measured and gets SIGTERM after. Its log is in\n" +
		"  `.tmp/bench/logs/kubelet-<run>-<token>.log`.\n")
	p("- **Pods to running:** in every round, after the crictl loop, N manifests of the same pods (newPods' spec;\n" +
		"  a random `metadata.uid`, which the kubelet keeps, and the run's token as an annotation) are written to\n" +
		"  a staging directory beside `staticPodPath` and renamed into it back to back; timed from the first\n" +
		"  rename until CRI lists N RUNNING containers of those UIDs (`k8s.io/cri-client`, polled every 2 ms).\n" +
		"  Its CPU is its threads' schedstat plus its waited-for children's ticks.\n")
	p("- **Restart after an external stop:** %d pods run (RunPods, restartPolicy Always; or static pods);\n"+
		"  for each in turn `crictl stop --timeout 0` of its container, timed from the command's return until\n"+
		"  CRI lists another RUNNING container of the pod (the first restart: no back-off). The floor: the same\n"+
		"  pods through CRI as the raw baseline makes them, whose next container the bench itself creates and\n"+
		"  starts the moment the stop returns (an agent that reacts in no time).\n", restartPods)
	p("- **Idle node:** %d pods run (RunPods in batches of %d, or static pods), %s to settle, then %s with\n"+
		"  nothing changing: CPU-seconds per minute of the agent (threads' schedstat + children), of containerd\n"+
		"  (with its waited-for children) and of its shims (with runc), from CPU time, not wall time; the agent's\n"+
		"  VmRSS at the end and VmHWM. The baseline is the same %d pods with podsyncd stopped. podsyncd is\n"+
		"  measured again with %d pods. The kubelet's cAdvisor watches every cgroup on the host, those of other\n"+
		"  jobs included.\n\n", idlePods, idleBatch, idleSettle(cfg.quick), cfg.idleWindow, idlePods, idlePodsLarge)
}

// renderKubeletRuns renders the kubelet column of pods to running.
func renderKubeletRuns(w *strings.Builder, fr *flavourResult) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("### podsync and the kubelet — containerd %s\n\n", flavourName(fr.flavour))
	p("| N | podsync RunPods | kubelet (static pods) | podsync ÷ kubelet | kubelet CPU per pod | containerd per pod, kubelet run | shims per pod, kubelet run |\n|---|---|---|---|---|---|---|\n")
	for _, rr := range fr.runs {
		p("| %d | %s | %s | **%s** | %s | %s | %s |\n", rr.n, rr.podsync.ms(), rr.kubelet.ms(), rr.kubeletRatio.ratio(),
			rr.kubeletCPU.num("%.2f ms"), rr.ctrdKubelet.num("%.1f ms"), rr.shimKubelet.num("%.1f ms"))
	}
	p("\n")
}

// kubeletFailures lists the failures of the kubelet rows.
func kubeletFailures(add func(where string, errs []string), res *results) {
	if res.kubeletErr != "" {
		add("kubelet", []string{res.kubeletErr})
	}
	for _, fr := range res.flavours {
		name := "containerd " + flavourName(fr.flavour)
		for _, rr := range fr.runs {
			add(fmt.Sprintf("%s, N = %d, kubelet", name, rr.n), rr.kubelet.errs)
		}
		if r := fr.restart; r != nil {
			add(name+", restart after stop", r.errs)
			add(name+", restart after stop, podsync", r.podsync.errs)
			add(name+", restart after stop, kubelet", r.kubelet.errs)
		}
		if r := fr.idle; r != nil {
			add(name+", idle node", r.errs)
			add(name+", idle node", r.skipped)
			for _, row := range r.rows() {
				if row.err != "" {
					add(name+", idle node, "+row.label, []string{row.err})
				}
			}
		}
	}
}
