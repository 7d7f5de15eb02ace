/*
 * The least a program in front of bwrap can cost: vfork, execve the
 * rest of argv, wait, exit with its status.  bench/exec.sh times it
 * twice, linked as it is (bare) and against code-exec's shared
 * libraries (--no-as-needed keeps them loaded though nothing here
 * calls them): the part of code-exec's overhead that any wrapper with
 * those libraries pays, on the machine at hand, before doing any work.
 */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int
main(int argc, char **argv)
{
	pid_t pid;
	int st;

	if (argc < 2) {
		fprintf(stderr, "usage: wrap PROGRAM [ARG...]\n");
		return 64;
	}
	pid = vfork();
	if (pid < 0) {
		perror("wrap: vfork");
		return 71;
	}
	if (pid == 0) {
		execve(argv[1], argv + 1, environ);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) != pid)
		return 71;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
