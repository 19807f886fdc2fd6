/* SPDX-License-Identifier: MIT */
/*
 * Asynchronous getaddrinfo() for the egress proxy (parent).  A small pool of
 * detached worker threads takes jobs from a queue and posts results to a done
 * list, signalling an eventfd the event loop watches.  Shared state is
 * reference-counted: the loop side and every live thread hold a reference,
 * so freeing the resolver while a lookup hangs is safe.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "resolve.h"

struct ab_resolve_job {
	ab_resolve_job *next;
	struct shared *sh;
	char *host;
	ab_resolve_cb cb;
	void *data;
	bool queued;    /* still waiting for a thread (under sh->mu) */
	bool cancelled; /* loop thread only */
	int gai;
	struct addrinfo *res;
};

typedef struct shared {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	ab_resolve_job *queue, **queue_tail;
	ab_resolve_job *done, **done_tail;
	size_t queued;
	unsigned threads, idle;
	int refs;
	bool stopping;
	int efd;
} shared;

struct ab_resolver {
	ab_loop *loop;
	shared *sh;
};

static void shared_unref_locked(shared *sh)
{
	if (--sh->refs > 0) {
		pthread_mutex_unlock(&sh->mu);
		return;
	}
	pthread_mutex_unlock(&sh->mu);
	for (ab_resolve_job *j = sh->queue, *n; j; j = n) {
		n = j->next;
		free(j->host);
		free(j);
	}
	for (ab_resolve_job *j = sh->done, *n; j; j = n) {
		n = j->next;
		if (j->res)
			freeaddrinfo(j->res);
		free(j->host);
		free(j);
	}
	close(sh->efd);
	pthread_mutex_destroy(&sh->mu);
	pthread_cond_destroy(&sh->cv);
	free(sh);
}

static void *worker(void *arg)
{
	shared *sh = arg;
	pthread_mutex_lock(&sh->mu);
	for (;;) {
		while (!sh->queue && !sh->stopping) {
			sh->idle++;
			pthread_cond_wait(&sh->cv, &sh->mu);
			sh->idle--;
		}
		if (sh->stopping)
			break;
		ab_resolve_job *j = sh->queue;
		sh->queue = j->next;
		if (!sh->queue)
			sh->queue_tail = &sh->queue;
		sh->queued--;
		j->queued = false;
		pthread_mutex_unlock(&sh->mu);

		struct addrinfo hints = {.ai_family = AF_UNSPEC,
					 .ai_socktype = SOCK_STREAM,
					 .ai_flags = AI_ADDRCONFIG};
		j->gai = getaddrinfo(j->host, NULL, &hints, &j->res);
		if (j->gai != 0)
			j->res = NULL;

		pthread_mutex_lock(&sh->mu);
		j->next = NULL;
		*sh->done_tail = j;
		sh->done_tail = &j->next;
		uint64_t one = 1;
		(void)!write(sh->efd, &one, sizeof(one));
	}
	sh->threads--;
	shared_unref_locked(sh);
	return NULL;
}

static void on_done(ab_loop *l, int fd, unsigned ev, void *data)
{
	ab_resolver *r = data;
	shared *sh = r->sh;
	uint64_t n;
	(void)!read(fd, &n, sizeof(n));
	pthread_mutex_lock(&sh->mu);
	ab_resolve_job *list = sh->done;
	sh->done = NULL;
	sh->done_tail = &sh->done;
	pthread_mutex_unlock(&sh->mu);
	while (list) {
		ab_resolve_job *j = list;
		list = j->next;
		if (!j->cancelled)
			j->cb(j->data, j->gai, j->res);
		if (j->res)
			freeaddrinfo(j->res);
		free(j->host);
		free(j);
	}
}

int ab_resolver_new(ab_loop *loop, ab_resolver **out, ab_err *err)
{
	ab_resolver *r = calloc(1, sizeof(*r));
	shared *sh = calloc(1, sizeof(*sh));
	if (!r || !sh) {
		free(r);
		free(sh);
		return ab_fail(err, ENOMEM, "resolver");
	}
	sh->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (sh->efd < 0) {
		int e = errno;
		free(r);
		free(sh);
		return ab_fail(err, e, "resolver: eventfd");
	}
	pthread_mutex_init(&sh->mu, NULL);
	pthread_cond_init(&sh->cv, NULL);
	sh->queue_tail = &sh->queue;
	sh->done_tail = &sh->done;
	sh->refs = 1;
	r->sh = sh;
	r->loop = loop;
	if (ab_loop_watch(loop, sh->efd, AB_EV_READ, on_done, r) < 0) {
		int e = errno;
		pthread_mutex_lock(&sh->mu);
		shared_unref_locked(sh);
		free(r);
		return ab_fail(err, e, "resolver: watch");
	}
	*out = r;
	return 0;
}

/* Threads start on demand, up to AB_RESOLVE_THREADS, with every signal
 * blocked (the loop's signalfd must get them). */
static void maybe_spawn(shared *sh)
{
	if (sh->idle > 0 || sh->threads >= AB_RESOLVE_THREADS)
		return;
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t t;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	if (pthread_create(&t, &attr, worker, sh) == 0) {
		sh->threads++;
		sh->refs++;
	}
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

ab_resolve_job *ab_resolve(ab_resolver *r, const char *host, ab_resolve_cb cb, void *data)
{
	shared *sh = r->sh;
	ab_resolve_job *j = calloc(1, sizeof(*j));
	if (!j || !(j->host = strdup(host))) {
		free(j);
		return NULL;
	}
	j->cb = cb;
	j->data = data;
	j->sh = sh;
	pthread_mutex_lock(&sh->mu);
	if (sh->queued >= AB_RESOLVE_MAX_QUEUE) {
		pthread_mutex_unlock(&sh->mu);
		free(j->host);
		free(j);
		return NULL;
	}
	maybe_spawn(sh);
	if (sh->threads == 0) {
		pthread_mutex_unlock(&sh->mu);
		free(j->host);
		free(j);
		return NULL;
	}
	*sh->queue_tail = j;
	sh->queue_tail = &j->next;
	sh->queued++;
	j->queued = true;
	pthread_cond_signal(&sh->cv);
	pthread_mutex_unlock(&sh->mu);
	return j;
}

/* A lookup nobody waits for any more leaves the queue at once: closed
 * connections must not keep the queue full (or the threads busy). */
void ab_resolve_cancel(ab_resolve_job *j)
{
	if (!j)
		return;
	shared *sh = j->sh;
	pthread_mutex_lock(&sh->mu);
	if (!j->queued) {
		j->cancelled = true; /* a thread has it, or it is done: on_done drops it */
		pthread_mutex_unlock(&sh->mu);
		return;
	}
	ab_resolve_job **pp = &sh->queue, *prev = NULL;
	while (*pp != j) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	*pp = j->next;
	if (sh->queue_tail == &j->next)
		sh->queue_tail = prev ? &prev->next : &sh->queue;
	sh->queued--;
	pthread_mutex_unlock(&sh->mu);
	free(j->host);
	free(j);
}

void ab_resolver_free(ab_resolver *r)
{
	if (!r)
		return;
	shared *sh = r->sh;
	ab_loop_unwatch(r->loop, sh->efd);
	pthread_mutex_lock(&sh->mu);
	sh->stopping = true;
	pthread_cond_broadcast(&sh->cv);
	shared_unref_locked(sh);
	free(r);
}
