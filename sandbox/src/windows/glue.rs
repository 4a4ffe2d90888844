//! The thin Win32 glue (Windows only): the ACL store behind the installation record, the
//! restricted token, the job object, and the suspended start that puts the command into the job
//! before it runs an instruction. It decides nothing: every value comes from the
//! [`WindowsPlan`](super::WindowsPlan).
//!
//! Type-checked for `x86_64-pc-windows-msvc` in CI (`ci/cross-check`) and run under Wine
//! (`ci/wine-check`), which implements the calls but enforces neither tokens nor ACLs; never run
//! on Windows. [`crate::detect::detect_windows`] reports the backend unavailable unless the user
//! opts in.

#![allow(unsafe_code)]

use std::ffi::OsStr;
use std::os::windows::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::ptr::{null, null_mut};

use windows_sys::Win32::Foundation::{CloseHandle, GetLastError, LocalFree, ERROR_SUCCESS, HANDLE};
use windows_sys::Win32::Security::Authorization::{
    ConvertSecurityDescriptorToStringSecurityDescriptorW, ConvertSidToStringSidW, ConvertStringSecurityDescriptorToSecurityDescriptorW,
    ConvertStringSidToSidW, GetNamedSecurityInfoW, SetNamedSecurityInfoW, SDDL_REVISION_1, SE_FILE_OBJECT,
};
use windows_sys::Win32::Security::{
    CreateRestrictedToken, GetSecurityDescriptorDacl, IsTokenRestricted, TokenRestrictedSids, GetSecurityDescriptorSacl, GetTokenInformation, InitializeAcl, SetTokenInformation, ACL, ACL_REVISION,
    DACL_SECURITY_INFORMATION, DISABLE_MAX_PRIVILEGE, LABEL_SECURITY_INFORMATION, LUA_TOKEN, OWNER_SECURITY_INFORMATION, PROTECTED_DACL_SECURITY_INFORMATION,
    PSECURITY_DESCRIPTOR, PSID, SID_AND_ATTRIBUTES, TOKEN_ADJUST_DEFAULT, TOKEN_ASSIGN_PRIMARY, TOKEN_DUPLICATE, TOKEN_GROUPS, TOKEN_MANDATORY_LABEL,
    TOKEN_QUERY, TOKEN_USER, TokenGroups, TokenIntegrityLevel, TokenUser, UNPROTECTED_DACL_SECURITY_INFORMATION, WRITE_RESTRICTED,
};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JobObjectBasicUIRestrictions, JobObjectExtendedLimitInformation, SetInformationJobObject,
    TerminateJobObject, JOBOBJECT_BASIC_UI_RESTRICTIONS, JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JOB_OBJECT_LIMIT_ACTIVE_PROCESS,
    JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION, JOB_OBJECT_LIMIT_JOB_MEMORY, JOB_OBJECT_LIMIT_JOB_TIME, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
    JOB_OBJECT_UILIMIT_DESKTOP, JOB_OBJECT_UILIMIT_DISPLAYSETTINGS, JOB_OBJECT_UILIMIT_EXITWINDOWS, JOB_OBJECT_UILIMIT_GLOBALATOMS,
    JOB_OBJECT_UILIMIT_HANDLES, JOB_OBJECT_UILIMIT_READCLIPBOARD, JOB_OBJECT_UILIMIT_SYSTEMPARAMETERS, JOB_OBJECT_UILIMIT_WRITECLIPBOARD,
};
use windows_sys::Win32::System::SystemServices::{SE_GROUP_INTEGRITY, SE_GROUP_LOGON_ID};
use windows_sys::Win32::System::Threading::{
    CreateProcessAsUserW, DeleteProcThreadAttributeList, GetCurrentProcess, InitializeProcThreadAttributeList, OpenProcessToken, ResumeThread,
    TerminateProcess, UpdateProcThreadAttribute, CREATE_SUSPENDED, CREATE_UNICODE_ENVIRONMENT, EXTENDED_STARTUPINFO_PRESENT, LPPROC_THREAD_ATTRIBUTE_LIST,
    PROCESS_INFORMATION, PROC_THREAD_ATTRIBUTE_HANDLE_LIST, STARTF_USESTDHANDLES, STARTUPINFOEXW,
};

use super::acl::{JobLimits, TokenSpec};
use super::record::{AclError, AclStore, Record};

fn wide(s: &OsStr) -> Vec<u16> {
    s.encode_wide().chain(std::iter::once(0)).collect()
}

/// A path for the security APIs: the `\\?\` prefix `canonicalize` adds is dropped from a
/// plain drive path shorter than `MAX_PATH` (not every implementation of
/// `GetNamedSecurityInfoW` accepts it; longer paths keep it).
fn wide_path(p: &Path) -> Vec<u16> {
    let s = p.to_string_lossy();
    match s.strip_prefix(r"\\?\") {
        Some(rest) if rest.len() < 260 && rest.as_bytes().get(1) == Some(&b':') => wide(OsStr::new(rest)),
        _ => wide(p.as_os_str()),
    }
}

fn last_error() -> String {
    std::io::Error::from_raw_os_error(unsafe { GetLastError() } as i32).to_string()
}

fn os(path: &Path, op: &'static str, message: String) -> AclError {
    AclError::Os { path: path.to_path_buf(), op, message }
}

/// A string the system allocated with `LocalAlloc`, read and freed.
///
/// # Safety
/// `p` is null or a NUL-terminated UTF-16 string from `LocalAlloc`, not used afterwards.
unsafe fn take_wide(p: *mut u16) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: as the caller promises.
    unsafe {
        let mut n = 0;
        while *p.add(n) != 0 {
            n += 1;
        }
        let s = String::from_utf16_lossy(std::slice::from_raw_parts(p, n));
        LocalFree(p.cast());
        s
    }
}

/// A SID's string.
///
/// # Safety
/// `sid` points to a valid SID.
unsafe fn sid_string(sid: PSID) -> Result<String, String> {
    let mut out: *mut u16 = null_mut();
    // SAFETY: as the caller promises; `out` is freed by take_wide.
    unsafe {
        if ConvertSidToStringSidW(sid, &mut out) == 0 {
            return Err(last_error());
        }
        Ok(take_wide(out))
    }
}

/// The security descriptors of files, and the record as a file.
pub struct Win32Acl {
    /// The record's file.
    pub record_path: PathBuf,
}

impl AclStore for Win32Acl {
    fn get(&mut self, path: &Path, part: char) -> Result<String, AclError> {
        let info = if part == 'S' { LABEL_SECURITY_INFORMATION } else { DACL_SECURITY_INFORMATION };
        let w = wide_path(path);
        unsafe {
            let mut sd: PSECURITY_DESCRIPTOR = null_mut();
            let r = GetNamedSecurityInfoW(w.as_ptr(), SE_FILE_OBJECT, info, null_mut(), null_mut(), null_mut(), null_mut(), &mut sd);
            if r != ERROR_SUCCESS {
                return Err(os(path, "GetNamedSecurityInfoW", std::io::Error::from_raw_os_error(r as i32).to_string()));
            }
            let mut text: *mut u16 = null_mut();
            let ok = ConvertSecurityDescriptorToStringSecurityDescriptorW(sd, SDDL_REVISION_1, info, &mut text, null_mut());
            LocalFree(sd);
            if ok == 0 {
                return Err(os(path, "ConvertSecurityDescriptorToStringSecurityDescriptorW", last_error()));
            }
            Ok(take_wide(text))
        }
    }

    fn set(&mut self, path: &Path, part: char, sddl: &str) -> Result<(), AclError> {
        let text = if part == 'S' && sddl.is_empty() { "S:".to_string() } else { sddl.to_string() };
        let w = wide_path(path);
        let t = wide(OsStr::new(&text));
        unsafe {
            let mut sd: PSECURITY_DESCRIPTOR = null_mut();
            if ConvertStringSecurityDescriptorToSecurityDescriptorW(t.as_ptr(), SDDL_REVISION_1, &mut sd, null_mut()) == 0 {
                return Err(os(path, "ConvertStringSecurityDescriptorToSecurityDescriptorW", last_error()));
            }
            let mut present = 0;
            let mut defaulted = 0;
            let mut acl: *mut ACL = null_mut();
            let mut empty = [0u64; 2];
            let r = if part == 'S' {
                GetSecurityDescriptorSacl(sd, &mut present, &mut acl, &mut defaulted);
                if acl.is_null() {
                    // No label left: an empty SACL removes it.
                    acl = empty.as_mut_ptr().cast();
                    InitializeAcl(acl, std::mem::size_of_val(&empty) as u32, ACL_REVISION);
                }
                SetNamedSecurityInfoW(w.as_ptr(), SE_FILE_OBJECT, LABEL_SECURITY_INFORMATION, null_mut(), null_mut(), null(), acl)
            } else {
                GetSecurityDescriptorDacl(sd, &mut present, &mut acl, &mut defaulted);
                let head = text.split('(').next().unwrap_or("");
                let protect = if head.contains('P') { PROTECTED_DACL_SECURITY_INFORMATION } else { UNPROTECTED_DACL_SECURITY_INFORMATION };
                SetNamedSecurityInfoW(w.as_ptr(), SE_FILE_OBJECT, DACL_SECURITY_INFORMATION | protect, null_mut(), null_mut(), acl, null())
            };
            LocalFree(sd);
            if r != ERROR_SUCCESS {
                return Err(os(path, "SetNamedSecurityInfoW", std::io::Error::from_raw_os_error(r as i32).to_string()));
            }
        }
        Ok(())
    }

    fn owner(&mut self, path: &Path) -> Result<String, AclError> {
        let w = wide_path(path);
        unsafe {
            let mut owner: PSID = null_mut();
            let mut sd: PSECURITY_DESCRIPTOR = null_mut();
            let r = GetNamedSecurityInfoW(w.as_ptr(), SE_FILE_OBJECT, OWNER_SECURITY_INFORMATION, &mut owner, null_mut(), null_mut(), null_mut(), &mut sd);
            if r != ERROR_SUCCESS {
                return Err(os(path, "GetNamedSecurityInfoW(owner)", std::io::Error::from_raw_os_error(r as i32).to_string()));
            }
            let s = sid_string(owner).map_err(|e| os(path, "ConvertSidToStringSidW", e));
            LocalFree(sd);
            s
        }
    }

    fn create_dir(&mut self, path: &Path) -> Result<(), AclError> {
        std::fs::create_dir(path).map_err(|e| os(path, "create_dir", e.to_string()))
    }

    fn remove_dir_if_empty(&mut self, path: &Path) -> Result<(), AclError> {
        match std::fs::remove_dir(path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound || e.raw_os_error() == Some(145) => Ok(()),
            Err(e) => Err(os(path, "remove_dir", e.to_string())),
        }
    }

    fn save(&mut self, record: &Record) -> Result<(), AclError> {
        use std::io::Write;
        let text = serde_json::to_string_pretty(record).map_err(|e| AclError::Record(e.to_string()))?;
        let tmp = self.record_path.with_extension("tmp");
        let write = || -> std::io::Result<()> {
            if let Some(d) = self.record_path.parent() {
                std::fs::create_dir_all(d)?;
            }
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, &self.record_path)
        };
        write().map_err(|e| AclError::Record(format!("{}: {e}", self.record_path.display())))
    }
}

/// An owned handle, closed on drop.
pub struct Owned(pub HANDLE);

impl Drop for Owned {
    fn drop(&mut self) {
        if !self.0.is_null() {
            unsafe { CloseHandle(self.0) };
        }
    }
}

/// The calling process's token.
fn own_token(access: u32) -> Result<Owned, String> {
    let mut t: HANDLE = null_mut();
    if unsafe { OpenProcessToken(GetCurrentProcess(), access, &mut t) } == 0 {
        return Err(format!("OpenProcessToken: {}", last_error()));
    }
    Ok(Owned(t))
}

/// A token information class's bytes.
fn token_info(t: &Owned, class: i32) -> Result<Vec<u64>, String> {
    let mut len = 0u32;
    unsafe { GetTokenInformation(t.0, class, null_mut(), 0, &mut len) };
    let mut buf = vec![0u64; (len as usize).div_ceil(8).max(1)];
    if unsafe { GetTokenInformation(t.0, class, buf.as_mut_ptr().cast(), len, &mut len) } == 0 {
        return Err(format!("GetTokenInformation({class}): {}", last_error()));
    }
    Ok(buf)
}

/// The SID of the user running this process.
///
/// # Errors
/// The failing call and the system's message.
pub fn user_sid() -> Result<String, String> {
    let t = own_token(TOKEN_QUERY)?;
    let buf = token_info(&t, TokenUser)?;
    unsafe { sid_string((*buf.as_ptr().cast::<TOKEN_USER>()).User.Sid) }
}

/// A SID parsed from its string, freed on drop.
struct Sid(PSID);

impl Sid {
    fn parse(s: &str) -> Result<Sid, String> {
        let w = wide(OsStr::new(s));
        let mut p: PSID = null_mut();
        if unsafe { ConvertStringSidToSidW(w.as_ptr(), &mut p) } == 0 {
            return Err(format!("ConvertStringSidToSidW({s}): {}", last_error()));
        }
        Ok(Sid(p))
    }
}

impl Drop for Sid {
    fn drop(&mut self) {
        unsafe { LocalFree(self.0) };
    }
}

/// The command's primary token, as `spec` says: restricted, write-restricted, at its integrity
/// level.
///
/// # Errors
/// The failing call and the system's message.
pub fn restricted_token(spec: &TokenSpec) -> Result<Owned, String> {
    let base = own_token(TOKEN_DUPLICATE | TOKEN_QUERY | TOKEN_ASSIGN_PRIMARY | TOKEN_ADJUST_DEFAULT)?;
    let groups = token_info(&base, TokenGroups)?;
    let mut sids: Vec<Sid> = Vec::new();
    let mut restrict: Vec<SID_AND_ATTRIBUTES> = Vec::new();
    for s in &spec.restricting_sids {
        if s == "logon" {
            let g = groups.as_ptr().cast::<TOKEN_GROUPS>();
            let n = unsafe { (*g).GroupCount } as usize;
            let list = unsafe { std::slice::from_raw_parts((*g).Groups.as_ptr(), n) };
            let logon = list.iter().find(|a| a.Attributes & (SE_GROUP_LOGON_ID as u32) == SE_GROUP_LOGON_ID as u32).ok_or("the token has no logon SID")?;
            restrict.push(SID_AND_ATTRIBUTES { Sid: logon.Sid, Attributes: 0 });
        } else {
            let sid = Sid::parse(s)?;
            restrict.push(SID_AND_ATTRIBUTES { Sid: sid.0, Attributes: 0 });
            sids.push(sid);
        }
    }
    let mut flags = 0;
    for f in &spec.flags {
        flags |= match f.as_str() {
            "DISABLE_MAX_PRIVILEGE" => DISABLE_MAX_PRIVILEGE,
            "LUA_TOKEN" => LUA_TOKEN,
            "WRITE_RESTRICTED" => WRITE_RESTRICTED,
            other => return Err(format!("unknown restricted-token flag {other}")),
        };
    }
    let mut new: HANDLE = null_mut();
    let ok = unsafe { CreateRestrictedToken(base.0, flags, 0, null(), 0, null(), restrict.len() as u32, restrict.as_ptr(), &mut new) };
    if ok == 0 {
        return Err(format!("CreateRestrictedToken: {}", last_error()));
    }
    let new = Owned(new);
    let level = Sid::parse(&spec.integrity)?;
    let label = TOKEN_MANDATORY_LABEL { Label: SID_AND_ATTRIBUTES { Sid: level.0, Attributes: SE_GROUP_INTEGRITY as u32 } };
    let ok = unsafe { SetTokenInformation(new.0, TokenIntegrityLevel, (&raw const label).cast(), std::mem::size_of::<TOKEN_MANDATORY_LABEL>() as u32) };
    if ok == 0 {
        return Err(format!("SetTokenInformation(TokenIntegrityLevel): {}", last_error()));
    }
    Ok(new)
}

/// Checks, from outside, that `process` runs under a restricted token at `spec`'s integrity
/// level with `spec`'s capability SID among its restricting SIDs.
///
/// # Errors
/// What differs, or the failing call.
pub fn verify_token(process: HANDLE, spec: &TokenSpec) -> Result<(), String> {
    let mut t: HANDLE = null_mut();
    if unsafe { OpenProcessToken(process, TOKEN_QUERY, &mut t) } == 0 {
        return Err(format!("OpenProcessToken(command): {}", last_error()));
    }
    let t = Owned(t);
    if unsafe { IsTokenRestricted(t.0) } == 0 {
        return Err("the command's token is not restricted".into());
    }
    let il = token_info(&t, TokenIntegrityLevel)?;
    let level = unsafe { sid_string((*il.as_ptr().cast::<TOKEN_MANDATORY_LABEL>()).Label.Sid) }?;
    if level != spec.integrity {
        return Err(format!("the command's integrity level is {level}, not {}", spec.integrity));
    }
    let rs = token_info(&t, TokenRestrictedSids)?;
    let g = rs.as_ptr().cast::<TOKEN_GROUPS>();
    let n = unsafe { (*g).GroupCount } as usize;
    let list = unsafe { std::slice::from_raw_parts((*g).Groups.as_ptr(), n) };
    let mut have = Vec::new();
    for a in list {
        have.push(unsafe { sid_string(a.Sid) }?);
    }
    for want in spec.restricting_sids.iter().filter(|s| *s != "logon") {
        if !have.contains(want) {
            return Err(format!("{want} is not among the command's restricting SIDs ({})", have.join(", ")));
        }
    }
    Ok(())
}

/// The job object with `limits`.
///
/// # Errors
/// The failing call and the system's message.
pub fn job(limits: &JobLimits) -> Result<Owned, String> {
    let j = Owned(unsafe { CreateJobObjectW(null(), null()) });
    if j.0.is_null() {
        return Err(format!("CreateJobObjectW: {}", last_error()));
    }
    let mut info: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = unsafe { std::mem::zeroed() };
    let b = &mut info.BasicLimitInformation;
    b.LimitFlags = JOB_OBJECT_LIMIT_ACTIVE_PROCESS | JOB_OBJECT_LIMIT_JOB_MEMORY | JOB_OBJECT_LIMIT_JOB_TIME;
    if limits.kill_on_close {
        b.LimitFlags |= JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
    }
    if limits.die_on_unhandled_exception {
        b.LimitFlags |= JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION;
    }
    b.ActiveProcessLimit = limits.active_processes;
    b.PerJobUserTimeLimit = i64::try_from(limits.cpu_time_100ns).unwrap_or(i64::MAX);
    info.JobMemoryLimit = usize::try_from(limits.job_memory_bytes).unwrap_or(usize::MAX);
    let ok = unsafe { SetInformationJobObject(j.0, JobObjectExtendedLimitInformation, (&raw const info).cast(), std::mem::size_of_val(&info) as u32) };
    if ok == 0 {
        return Err(format!("SetInformationJobObject(limits): {}", last_error()));
    }
    let mut ui = 0;
    for r in &limits.ui_restrictions {
        ui |= match r.as_str() {
            "READCLIPBOARD" => JOB_OBJECT_UILIMIT_READCLIPBOARD,
            "WRITECLIPBOARD" => JOB_OBJECT_UILIMIT_WRITECLIPBOARD,
            "DESKTOP" => JOB_OBJECT_UILIMIT_DESKTOP,
            "DISPLAYSETTINGS" => JOB_OBJECT_UILIMIT_DISPLAYSETTINGS,
            "EXITWINDOWS" => JOB_OBJECT_UILIMIT_EXITWINDOWS,
            "GLOBALATOMS" => JOB_OBJECT_UILIMIT_GLOBALATOMS,
            "HANDLES" => JOB_OBJECT_UILIMIT_HANDLES,
            "SYSTEMPARAMETERS" => JOB_OBJECT_UILIMIT_SYSTEMPARAMETERS,
            other => return Err(format!("unknown UI restriction {other}")),
        };
    }
    let uir = JOBOBJECT_BASIC_UI_RESTRICTIONS { UIRestrictionsClass: ui };
    let ok = unsafe { SetInformationJobObject(j.0, JobObjectBasicUIRestrictions, (&raw const uir).cast(), std::mem::size_of_val(&uir) as u32) };
    if ok == 0 {
        return Err(format!("SetInformationJobObject(UI): {}", last_error()));
    }
    Ok(j)
}

/// A started command: its process, its main thread, and the job it is in.
pub struct Started {
    /// The process.
    pub process: Owned,
    /// Its process id.
    pub pid: u32,
    /// The job (terminated at the timeout; closing it kills the tree).
    pub job: Owned,
}

impl Started {
    /// Terminates every process of the job.
    pub fn kill(&self) {
        unsafe { TerminateJobObject(self.job.0, 1) };
    }
}

/// Starts `command_line` under `token`, suspended, assigns it to `job`, lets `verify` check the
/// suspended process from outside, and only then resumes it: it runs no instruction outside the
/// job or unverified. Only `stdio` is inherited (the handle list).
///
/// # Errors
/// The failing call and the system's message, or `verify`'s; a process that could not be put
/// into the job or failed verification is terminated before it ran.
pub fn start(token: &Owned, job: Owned, command_line: &OsStr, env_block: &[u16], cwd: &Path, stdio: [HANDLE; 3], verify: &dyn Fn(HANDLE) -> Result<(), String>) -> Result<Started, String> {
    let mut size = 0usize;
    unsafe { InitializeProcThreadAttributeList(null_mut(), 1, 0, &mut size) };
    let mut attr_buf = vec![0u64; size.div_ceil(8).max(1)];
    let attrs: LPPROC_THREAD_ATTRIBUTE_LIST = attr_buf.as_mut_ptr().cast();
    if unsafe { InitializeProcThreadAttributeList(attrs, 1, 0, &mut size) } == 0 {
        return Err(format!("InitializeProcThreadAttributeList: {}", last_error()));
    }
    let handles = stdio;
    let ok = unsafe { UpdateProcThreadAttribute(attrs, 0, PROC_THREAD_ATTRIBUTE_HANDLE_LIST as usize, handles.as_ptr().cast(), std::mem::size_of_val(&handles), null_mut(), null()) };
    if ok == 0 {
        unsafe { DeleteProcThreadAttributeList(attrs) };
        return Err(format!("UpdateProcThreadAttribute(handle list): {}", last_error()));
    }
    let mut si: STARTUPINFOEXW = unsafe { std::mem::zeroed() };
    si.StartupInfo.cb = std::mem::size_of::<STARTUPINFOEXW>() as u32;
    si.StartupInfo.dwFlags = STARTF_USESTDHANDLES;
    si.StartupInfo.hStdInput = stdio[0];
    si.StartupInfo.hStdOutput = stdio[1];
    si.StartupInfo.hStdError = stdio[2];
    si.lpAttributeList = attrs;
    let mut cmd = wide(command_line);
    let dir = wide(cwd.as_os_str());
    let mut pi: PROCESS_INFORMATION = unsafe { std::mem::zeroed() };
    let ok = unsafe {
        CreateProcessAsUserW(
            token.0,
            null(),
            cmd.as_mut_ptr(),
            null(),
            null(),
            1,
            CREATE_SUSPENDED | CREATE_UNICODE_ENVIRONMENT | EXTENDED_STARTUPINFO_PRESENT,
            env_block.as_ptr().cast(),
            dir.as_ptr(),
            &si.StartupInfo,
            &mut pi,
        )
    };
    unsafe { DeleteProcThreadAttributeList(attrs) };
    if ok == 0 {
        return Err(format!("CreateProcessAsUserW: {}", last_error()));
    }
    let process = Owned(pi.hProcess);
    let thread = Owned(pi.hThread);
    if unsafe { AssignProcessToJobObject(job.0, process.0) } == 0 {
        let e = last_error();
        unsafe { TerminateProcess(process.0, 1) };
        return Err(format!("AssignProcessToJobObject: {e} (the process was terminated before it ran)"));
    }
    if let Err(e) = verify(process.0) {
        unsafe { TerminateJobObject(job.0, 1) };
        return Err(format!("the suspended command is not confined as planned: {e} (terminated before it ran)"));
    }
    if unsafe { ResumeThread(thread.0) } == u32::MAX {
        let e = last_error();
        unsafe { TerminateJobObject(job.0, 1) };
        return Err(format!("ResumeThread: {e}"));
    }
    Ok(Started { process, pid: pi.dwProcessId, job })
}
