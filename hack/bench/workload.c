// workload: a server-shaped latency benchmark, timed inside the server.
//
// A dispatcher thread plays the network: it produces requests at a fixed
// mean rate (Poisson arrivals, optionally in bursts) and hands each one to a
// pool of worker threads through a mutex + condition variable (a futex
// wakeup). Each request burns a fixed amount of the worker's own CPU time.
// Every request is timestamped on the server side with CLOCK_MONOTONIC:
//
//   arrival  the moment the request was due (open loop: a late dispatcher
//            does not hide its own delay)
//   enqueue  the moment the dispatcher queued it and woke a worker
//   start    the moment a worker picked it up
//   done     the moment the worker finished it
//
// and the program prints p50/p99/p99.9/max of queue-to-start (start-enqueue:
// wakeup + run-queue wait) and end-to-end (done-arrival) latency, in µs.
//
// Usage: workload [-n requests] [-r rate/s] [-s service_us] [-w workers]
//                 [-b burst] [-c cpu] [-o samples_file] [-l label] [-T max_s]
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
	int64_t arrival, enqueue, start, done;
} req_t;

static struct {
	long n;          // requests
	double rate;     // mean arrivals per second (each arrival = burst requests)
	long service_ns; // CPU time per request
	int workers;
	int burst;
	int cpu; // -1: no pinning
	const char *out;
	const char *label;
	double max_s; // stop dispatching after this long
} cfg = {20000, 2000, 20000, 8, 1, -1, NULL, "run", 60};

static req_t *reqs;
static long q_head, q_tail, n_done, n_sent;
static int stopping;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_cv = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;

static int64_t now_ns(clockid_t c) {
	struct timespec ts;
	clock_gettime(c, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_until(int64_t t) {
	struct timespec ts = {t / 1000000000, t % 1000000000};
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
	}
}

static void pin_self(void) {
	if (cfg.cpu < 0)
		return;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cfg.cpu, &set);
	if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0) {
		fprintf(stderr, "workload: cannot pin to CPU %d\n", cfg.cpu);
		exit(2);
	}
}

// burn spins until this thread has used ns of CPU time: the request costs
// CPU, not wall time, so preemption shows up as latency, not as less work.
static void burn(long ns) {
	int64_t end = now_ns(CLOCK_THREAD_CPUTIME_ID) + ns;
	volatile uint64_t x = 0;
	while (now_ns(CLOCK_THREAD_CPUTIME_ID) < end)
		for (int i = 0; i < 1000; i++)
			x += i;
}

static void *worker(void *arg) {
	(void)arg;
	pin_self();
	for (;;) {
		pthread_mutex_lock(&mu);
		while (q_head == q_tail && !stopping)
			pthread_cond_wait(&work_cv, &mu);
		if (q_head == q_tail) {
			pthread_mutex_unlock(&mu);
			return NULL;
		}
		req_t *r = &reqs[q_head++];
		pthread_mutex_unlock(&mu);
		r->start = now_ns(CLOCK_MONOTONIC);
		burn(cfg.service_ns);
		r->done = now_ns(CLOCK_MONOTONIC);
		pthread_mutex_lock(&mu);
		if (++n_done == n_sent && stopping)
			pthread_cond_signal(&done_cv);
		pthread_mutex_unlock(&mu);
	}
}

// exp_gap returns an exponential inter-arrival gap in ns (xorshift PRNG,
// fixed seed: every run sees the same arrival pattern).
static int64_t exp_gap(void) {
	static uint64_t s = 88172645463325252ull;
	s ^= s << 13;
	s ^= s >> 7;
	s ^= s << 17;
	double u = ((s >> 11) + 0.5) / 9007199254740992.0;
	return (int64_t)(-log(u) / cfg.rate * 1e9);
}

static void dispatch(void) {
	pin_self();
	int64_t t0 = now_ns(CLOCK_MONOTONIC), due = t0;
	int64_t deadline = t0 + (int64_t)(cfg.max_s * 1e9);
	long i = 0;
	while (i < cfg.n) {
		due += exp_gap();
		if (due > deadline)
			break;
		sleep_until(due);
		pthread_mutex_lock(&mu);
		int64_t t = now_ns(CLOCK_MONOTONIC);
		for (int b = 0; b < cfg.burst && i < cfg.n; b++, i++) {
			reqs[i].arrival = due;
			reqs[i].enqueue = t;
			q_tail++;
			pthread_cond_signal(&work_cv);
		}
		n_sent = i;
		pthread_mutex_unlock(&mu);
	}
	pthread_mutex_lock(&mu);
	stopping = 1;
	pthread_cond_broadcast(&work_cv);
	while (n_done < n_sent)
		pthread_cond_wait(&done_cv, &mu);
	pthread_mutex_unlock(&mu);
}

static int cmp_i64(const void *a, const void *b) {
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static double pct(const int64_t *sorted, long n, double p) {
	long i = (long)ceil(p / 100.0 * n) - 1;
	if (i < 0)
		i = 0;
	return sorted[i] / 1000.0;
}

static void report(const char *name, int64_t *v, long n) {
	qsort(v, n, sizeof(*v), cmp_i64);
	printf(" %s_p50_us=%.1f %s_p99_us=%.1f %s_p999_us=%.1f %s_max_us=%.1f", name,
	       pct(v, n, 50), name, pct(v, n, 99), name, pct(v, n, 99.9), name,
	       v[n - 1] / 1000.0);
}

static void usage(void) {
	fprintf(stderr, "usage: workload [-n requests] [-r rate] [-s service_us] [-w workers] "
	                "[-b burst] [-c cpu] [-o samples] [-l label] [-T max_s]\n");
	exit(2);
}

int main(int argc, char **argv) {
	int c;
	while ((c = getopt(argc, argv, "n:r:s:w:b:c:o:l:T:")) != -1) {
		switch (c) {
		case 'n': cfg.n = atol(optarg); break;
		case 'r': cfg.rate = atof(optarg); break;
		case 's': cfg.service_ns = (long)(atof(optarg) * 1000); break;
		case 'w': cfg.workers = atoi(optarg); break;
		case 'b': cfg.burst = atoi(optarg); break;
		case 'c': cfg.cpu = atoi(optarg); break;
		case 'o': cfg.out = optarg; break;
		case 'l': cfg.label = optarg; break;
		case 'T': cfg.max_s = atof(optarg); break;
		default: usage();
		}
	}
	if (cfg.n < 1 || cfg.rate <= 0 || cfg.workers < 1 || cfg.burst < 1)
		usage();
	cfg.rate /= cfg.burst; // -r is requests/s; arrivals come burst at a time
	reqs = calloc(cfg.n, sizeof(*reqs));
	pthread_t *tids = calloc(cfg.workers, sizeof(*tids));
	if (!reqs || !tids)
		return 1;
	for (int i = 0; i < cfg.workers; i++)
		pthread_create(&tids[i], NULL, worker, NULL);
	int64_t t0 = now_ns(CLOCK_MONOTONIC);
	dispatch();
	double wall = (now_ns(CLOCK_MONOTONIC) - t0) / 1e9;
	for (int i = 0; i < cfg.workers; i++)
		pthread_join(tids[i], NULL);

	long n = n_sent;
	int64_t *q2s = malloc(n * sizeof(int64_t)), *e2e = malloc(n * sizeof(int64_t));
	FILE *f = cfg.out ? fopen(cfg.out, "w") : NULL;
	for (long i = 0; i < n; i++) {
		q2s[i] = reqs[i].start - reqs[i].enqueue;
		e2e[i] = reqs[i].done - reqs[i].arrival;
		if (f)
			fprintf(f, "%.1f %.1f\n", q2s[i] / 1000.0, e2e[i] / 1000.0);
	}
	if (f)
		fclose(f);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	double cpu = ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
	             (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
	printf("label=%s requests=%ld of=%ld wall_s=%.2f cpus_used=%.2f", cfg.label, n, cfg.n,
	       wall, cpu / wall);
	report("q2s", q2s, n);
	report("e2e", e2e, n);
	printf("\n");
	return n == cfg.n ? 0 : 3;
}
