/* SPDX-License-Identifier: MIT */
/*
 * A userspace delay line for bench/reallink.py (this kernel has no
 * sch_netem): every packet the kernel routes into the tun device TUN is
 * written back into it DELAY_US microseconds later, in order; the routing
 * around it (reallink.py) sends what comes back out on to its destination.
 * GSO offloads on (IFF_VNET_HDR, TUNSETOFFLOAD): a TCP stream at 1 Gbit/s is
 * a few thousand 64 KiB packets a second, not 80,000 of 1.5 KiB.  A packet
 * that finds the line full is dropped, as a full queue would.
 *
 *   delayline TUN DELAY_US
 *
 * Runs until killed.  Bench tool, not part of agentbox.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define RING (64u << 20) /* bytes in flight: far above 1 Gbit/s x 50 ms */
#define PKT_MAX (65536 + 64)

struct ent {
	uint64_t due_ns;
	uint32_t len; /* WRAP: the rest of the ring is unused, go on at 0 */
};

#define WRAP UINT32_MAX

/* Entries in arrival order, never across the ring's end. */
static unsigned char ring[RING];
static size_t head, tail, count;

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static size_t ent_size(size_t len)
{
	return (sizeof(struct ent) + len + 7) & ~(size_t)7;
}

/* Where an entry of up to need bytes goes, or NULL (the line is full). */
static struct ent *reserve(size_t need)
{
	if (!count)
		head = tail = 0;
	else if (tail == head)
		return NULL;
	if (tail >= head) {
		if (RING - tail >= need)
			return (struct ent *)(ring + tail);
		if (head < need)
			return NULL;
		if (RING - tail >= sizeof(struct ent))
			((struct ent *)(ring + tail))->len = WRAP;
		tail = 0;
		return (struct ent *)ring;
	}
	return head - tail >= need ? (struct ent *)(ring + tail) : NULL;
}

static void pop(void)
{
	head += ent_size(((struct ent *)(ring + head))->len);
	if (--count == 0) {
		head = tail = 0;
		return;
	}
	if (RING - head < sizeof(struct ent) || ((struct ent *)(ring + head))->len == WRAP)
		head = 0;
}

static int open_tun(const char *name)
{
	struct ifreq ifr;
	int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -1;
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_TUN | IFF_NO_PI | IFF_VNET_HDR;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (ioctl(fd, TUNSETIFF, &ifr) < 0 ||
	    ioctl(fd, TUNSETOFFLOAD, TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: delayline TUN DELAY_US\n");
		return 2;
	}
	uint64_t delay = strtoull(argv[2], NULL, 10) * 1000u;
	int fd = open_tun(argv[1]);
	if (fd < 0) {
		fprintf(stderr, "delayline: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	static unsigned char scratch[PKT_MAX];
	for (;;) {
		/* send what is due */
		uint64_t t = now_ns();
		while (count) {
			struct ent *e = (struct ent *)(ring + head);
			if (e->due_ns > t)
				break;
			(void)!write(fd, e + 1, e->len); /* a packet the kernel refuses is lost */
			pop();
		}
		struct timespec ts, *tsp = NULL;
		if (count) {
			uint64_t d = ((struct ent *)(ring + head))->due_ns - t;
			ts.tv_sec = (time_t)(d / 1000000000u);
			ts.tv_nsec = (long)(d % 1000000000u);
			tsp = &ts;
		}
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (ppoll(&p, 1, tsp, NULL) < 0 && errno != EINTR)
			return 1;
		/* take in everything waiting */
		for (int i = 0; i < 256; i++) {
			struct ent *e = reserve(ent_size(PKT_MAX));
			ssize_t n = read(fd, e ? (unsigned char *)(e + 1) : scratch, PKT_MAX);
			if (n <= 0)
				break;
			if (!e)
				continue; /* dropped: the line is full */
			e->due_ns = now_ns() + delay;
			e->len = (uint32_t)n;
			tail = (size_t)((unsigned char *)e - ring) + ent_size((size_t)n);
			count++;
		}
	}
}
