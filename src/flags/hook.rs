//! `nvidia-container-runtime-hook`'s command line, as upstream's (Go `flag` syntax: one or two
//! dashes, `-config FILE` or `-config=FILE`): `[-config FILE] [-debug] [-version] [-h|-help]
//! prestart|poststart|poststop`.

use std::path::PathBuf;

pub const USAGE: &str = "usage: nvidia-container-runtime-hook [-config FILE] [-debug] [-version] [-h|-help] prestart|poststart|poststop";

pub struct Args {
    pub config: Option<PathBuf>,
    pub debug: bool,
    pub version: bool,
    pub help: bool,
    pub command: Option<String>,
}

pub fn parse_args(args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut out = Args {
        config: None,
        debug: false,
        version: false,
        help: false,
        command: None,
    };
    let mut args = args.peekable();
    while let Some(arg) = args.next() {
        let flag = arg.trim_start_matches('-');
        let is_flag = arg.starts_with('-');
        match (is_flag, flag.split_once('=')) {
            (true, Some(("config", v))) => out.config = Some(v.into()),
            (true, None) if flag == "config" => {
                out.config = Some(args.next().ok_or("-config needs a file name")?.into());
            }
            (true, None) if flag == "debug" => out.debug = true,
            (true, None) if flag == "version" => out.version = true,
            (true, None) if flag == "h" || flag == "help" => out.help = true,
            (true, _) => return Err(format!("unknown flag {arg}")),
            (false, _) if out.command.is_none() => out.command = Some(arg),
            (false, _) => return Err(format!("unexpected argument {arg}")),
        }
    }
    Ok(out)
}
