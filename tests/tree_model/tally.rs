//! What a model run's steps came to, counted by kind: the run fails unless
//! enough of each succeeded.

/// Which count of the tally a step's outcome goes to.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Spawn,
    Send,
    Stop,
    Archive,
    Kill,
    Wait,
    Command,
}

/// What one kind of step achieved: how often it had something to act on,
/// and how often it then succeeded.
#[derive(Debug, Default, Clone, Copy)]
pub struct Count {
    pub tried: u32,
    pub done: u32,
}

impl Count {
    pub fn record(&mut self, done: bool) {
        self.tried += 1;
        self.done += u32::from(done);
    }

    pub fn add(&mut self, other: Count) {
        self.tried += other.tried;
        self.done += other.done;
    }
}

/// Outcomes of a run's steps, by kind.
#[derive(Debug, Default, Clone, Copy)]
pub struct Tally {
    pub spawns: Count,
    pub sends: Count,
    pub stops: Count,
    pub archives: Count,
    pub kills: Count,
    pub waits: Count,
    pub commands: Count,
    pub restarts: Count,
    /// Structural steps run two at once.
    pub together: Count,
    /// Pairs of them whose targets were in different public agents'
    /// subtrees, each counted done only if both went through: changes to
    /// different subtrees never wait for or refuse each other.
    pub apart: Count,
    /// Commands seen running, then checked gone once no longer running.
    pub processes_gone: u32,
}

impl Tally {
    pub fn add(&mut self, other: &Tally) {
        for (mine, theirs) in self.counts_mut().into_iter().zip(other.counts()) {
            mine.add(theirs);
        }
        self.processes_gone += other.processes_gone;
        self.together.add(other.together);
        self.apart.add(other.apart);
    }

    pub fn count_mut(&mut self, kind: Kind) -> &mut Count {
        match kind {
            Kind::Spawn => &mut self.spawns,
            Kind::Send => &mut self.sends,
            Kind::Stop => &mut self.stops,
            Kind::Archive => &mut self.archives,
            Kind::Kill => &mut self.kills,
            Kind::Wait => &mut self.waits,
            Kind::Command => &mut self.commands,
        }
    }

    pub fn counts(&self) -> [Count; 8] {
        [
            self.spawns,
            self.sends,
            self.stops,
            self.archives,
            self.kills,
            self.waits,
            self.commands,
            self.restarts,
        ]
    }

    pub fn counts_mut(&mut self) -> [&mut Count; 8] {
        [
            &mut self.spawns,
            &mut self.sends,
            &mut self.stops,
            &mut self.archives,
            &mut self.kills,
            &mut self.waits,
            &mut self.commands,
            &mut self.restarts,
        ]
    }
}
