/*
 * The pod sandbox's process: it holds the pod's namespaces and does nothing
 * else. It sleeps until SIGINT or SIGTERM and reaps any child it inherits
 * (it is PID 1 of the pod when the PID namespace is shared). Built static,
 * so the image needs nothing but this file.
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) { _exit(128 + sig); }

static void reap(int sig) {
	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0) {
	}
}

int main(void) {
	struct sigaction term = {.sa_handler = stop};
	struct sigaction child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP | SA_RESTART};
	if (sigaction(SIGINT, &term, NULL) < 0 || sigaction(SIGTERM, &term, NULL) < 0 ||
	    sigaction(SIGCHLD, &child, NULL) < 0) {
		return 1;
	}
	for (;;) {
		pause();
	}
}
