"""The chaos drill's killer: two instances of every service (one consumer group per consuming
service, distinct service.instance_id, hence distinct transactional ids), one of them killed
with SIGKILL at random moments and started again after a random pause with the same instance id
(so that its transactional producer fences the dead one at once)."""
import signal
import time

SERVICES = ("registrar", "claimer", "completion", "dispatcher", "sweeper")
INSTANCES = ("a", "b")

# Per service, what the drill changes from llsim.stack's test defaults. The consumers: a shorter
# session (the broker's minimum, 6 s) and heartbeat, so that a dead member's partitions move to
# the other instance sooner. The sweeper resends a validate-run command unacknowledged for 10 s
# (more duplicates), its ticks every second.
SETTINGS = {
    "registrar": {"kafka.session.timeout.ms": 6000, "kafka.heartbeat.interval.ms": 1000},
    "claimer": {"kafka.session.timeout.ms": 6000, "kafka.heartbeat.interval.ms": 1000},
    "completion": {"kafka.session.timeout.ms": 6000, "kafka.heartbeat.interval.ms": 1000},
    "dispatcher": {},
    "sweeper": {"dispatch.ack_timeout": "PT10S"},
}


class Killer:
    """Kills a random live instance every `every` seconds on average (uniform in [0.25, 1.75]
    times it) and restarts it after `pause` = (min, max) seconds. step() does what is due."""

    def __init__(self, stack, rnd, every, pause=(0.2, 1.5), settings=None):
        self.stack = stack
        self.rnd = rnd
        self.every = every
        self.pause = pause
        self.settings = settings or SETTINGS
        self.kills = {s: 0 for s in SERVICES}
        self.restarts = 0
        self.unexpected = []  # (instance, exit code): an instance that died without our kill
        self.down = {}  # instance -> time of its restart
        self.next_kill = None
        self.active = False

    @staticmethod
    def service_of(instance):
        return instance.rsplit("-", 1)[0]

    def instances(self):
        return ["%s-%s" % (s, i) for s in SERVICES for i in INSTANCES]

    def start_all(self):
        for inst in self.instances():
            self._start(inst)

    def _start(self, inst):
        svc = self.service_of(inst)
        self.stack.start(svc, inst, settings=self.settings.get(svc, {}))

    def begin(self):
        self.active = True
        self.next_kill = time.time() + self._interval()

    def stop_killing(self):
        self.active = False

    def _interval(self):
        return self.rnd.uniform(0.25 * self.every, 1.75 * self.every)

    def total(self):
        return sum(self.kills.values())

    def step(self):
        now = time.time()
        for inst in list(self.stack.procs):
            p, _ = self.stack.procs[inst]
            if p.poll() is not None:
                self.unexpected.append((inst, p.returncode))
                self.stack.wait_exit(inst, timeout=5)
                self.down[inst] = now
        for inst, at in list(self.down.items()):
            if at <= now:
                del self.down[inst]
                self._start(inst)
                self.restarts += 1
        if self.active and now >= self.next_kill:
            alive = [i for i in self.instances() if i in self.stack.procs]
            inst = self.rnd.choice(alive)
            self.stack.kill(inst, signal.SIGKILL)
            self.kills[self.service_of(inst)] += 1
            self.down[inst] = now + self.rnd.uniform(*self.pause)
            self.next_kill = now + self._interval()

    def settle(self):
        """Starts every instance still down now (at the end of the killing)."""
        for inst in list(self.down):
            del self.down[inst]
            self._start(inst)
            self.restarts += 1
