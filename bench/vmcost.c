/* SPDX-License-Identifier: MIT */
/*
 * What this machine charges for memory (part of `make bench`, compiled and
 * run by bench/startup.sh): the start-up figures are mostly page faults, and
 * their price differs by an order of magnitude between bare metal and some
 * virtual machines (docs/performance.md, "Why the start-up targets do not
 * hold here").  Prints a markdown table of medians over ROUNDS rounds:
 *
 *   fresh      first write to an anonymous page (a page fault)
 *   cow        first write to a page shared with a forked child
 *   populated  MADV_POPULATE_WRITE of the range, then the first write
 *   fork       fork(2) of a process holding PAGES written pages, per page
 *   2 at once  the fresh-fault loop in two processes at once, against one:
 *              1.0 when the two CPUs fault independently
 *   cpu 2      a CPU-only loop in two processes at once, against one
 *
 *   cc -O2 -o vmcost bench/vmcost.c && ./vmcost
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define PAGES 2000
#define ROUNDS 7
#define PG 4096

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static char *fresh_map(void)
{
	char *p = mmap(NULL, (size_t)PAGES * PG, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	(void)madvise(p, (size_t)PAGES * PG, MADV_NOHUGEPAGE); /* 4 KiB pages, as a heap's */
	return p;
}

static void touch(char *p, char v)
{
	for (size_t i = 0; i < PAGES; i++)
		p[i * PG] = v;
}

/* us per page */
static double fresh(void)
{
	char *p = fresh_map();
	double t = now_us();
	touch(p, 1);
	t = now_us() - t;
	munmap(p, (size_t)PAGES * PG);
	return t / PAGES;
}

static double cow(void)
{
	char *p = fresh_map();
	touch(p, 1);
	int go[2];
	if (pipe(go) < 0)
		exit(1);
	pid_t c = fork();
	if (c == 0) {
		char b;
		(void)read(go[0], &b, 1); /* holds the pages shared until we are done */
		_exit(0);
	}
	double t = now_us();
	touch(p, 2);
	t = now_us() - t;
	(void)write(go[1], "x", 1);
	waitpid(c, NULL, 0);
	close(go[0]);
	close(go[1]);
	munmap(p, (size_t)PAGES * PG);
	return t / PAGES;
}

static double populated(void)
{
	char *p = fresh_map();
	double t = now_us();
	if (madvise(p, (size_t)PAGES * PG, MADV_POPULATE_WRITE) < 0)
		return -1;
	touch(p, 1);
	t = now_us() - t;
	munmap(p, (size_t)PAGES * PG);
	return t / PAGES;
}

static double fork_cost(void)
{
	char *p = fresh_map();
	touch(p, 1);
	double t = now_us();
	pid_t c = fork();
	if (c == 0)
		_exit(0);
	t = now_us() - t;
	waitpid(c, NULL, 0);
	munmap(p, (size_t)PAGES * PG);
	return t / PAGES;
}

static volatile unsigned long sink;

static void spin(void)
{
	unsigned long x = 1;
	for (long i = 0; i < 10000000; i++)
		x = x * 6364136223846793005UL + 1;
	sink = x;
}

static void faults(void)
{
	for (int k = 0; k < 3; k++) {
		char *p = fresh_map();
		touch(p, 1);
		munmap(p, (size_t)PAGES * PG);
	}
}

/* the wall time of fn in n processes at once */
static double together(void (*fn)(void), int n)
{
	double t = now_us();
	for (int i = 0; i < n; i++)
		if (fork() == 0) {
			fn();
			_exit(0);
		}
	for (int i = 0; i < n; i++)
		wait(NULL);
	return now_us() - t;
}

static double two_over_one_faults(void)
{
	return together(faults, 2) / together(faults, 1);
}

static double two_over_one_cpu(void)
{
	return together(spin, 2) / together(spin, 1);
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double (*fn)(void))
{
	double v[ROUNDS];
	for (int i = 0; i < ROUNDS; i++)
		v[i] = fn();
	qsort(v, ROUNDS, sizeof(v[0]), cmp);
	return v[ROUNDS / 2];
}

int main(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	printf("### What this machine charges for memory (medians of %d rounds, %d pages, "
	       "%ld CPUs)\n\n",
	       ROUNDS, PAGES, cpus);
	printf("| what | cost |\n|---|---:|\n");
	printf("| first write to a fresh page (a page fault) | %.2f us |\n", median(fresh));
	printf("| first write to a page shared with a fork (copy on write) | %.2f us |\n",
	       median(cow));
	double pop = median(populated);
	if (pop >= 0)
		printf("| MADV_POPULATE_WRITE, then the first write | %.2f us |\n", pop);
	printf("| fork, per written page of the parent | %.3f us |\n", median(fork_cost));
	if (cpus >= 2) {
		printf("| page faults in 2 processes at once, against 1 (wall) | %.2fx |\n",
		       median(two_over_one_faults));
		printf("| a CPU-only loop in 2 processes at once, against 1 (wall) | %.2fx |\n",
		       median(two_over_one_cpu));
	}
	return 0;
}
