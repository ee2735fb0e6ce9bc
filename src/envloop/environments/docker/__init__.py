"""The Docker foundation of the `docker` environment: base images, task images, trial containers.

Task images are built once per task digest (`ensure_task_image`); each trial runs in its own
container (`running_container`), reached only through exec and tar copies, never a host mount.
Every Dockerfile envloop builds (a task's, a separate verifier's, a sidecar's) goes through
`prepare_dockerfile` (the operator's substitutions, `# syntax=` lines), and `missing_images` says
which of its images this machine can neither have nor make, with the reason.

Import from the module that defines a name: the package itself imports nothing, so a module that
needs one light part (a task's compose file, the Docker CLI's errors) does not load the client and
the container machinery with it.
"""
