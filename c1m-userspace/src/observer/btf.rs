//! A small reader of the kernel's BTF (`/sys/kernel/btf/vmlinux`): just enough to
//! find struct member offsets and enum values, so the eBPF programs can read kernel
//! structs on any build of the kernel without CO-RE.
//!
//! Format: https://docs.kernel.org/bpf/btf.html

use std::{collections::HashMap, path::Path};

use thiserror::Error;

#[derive(Debug, Error)]
pub enum BtfError {
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("not a BTF blob: {0}")]
    Format(&'static str),
    #[error("struct {0} not found in kernel BTF")]
    NoStruct(String),
    #[error("{0} has no member {1}")]
    NoMember(String, String),
    #[error("{0}.{1} is a bitfield")]
    Bitfield(String, String),
}

const MAGIC: u16 = 0xeb9f;

const KIND_INT: u32 = 1;
const KIND_PTR: u32 = 2;
const KIND_ARRAY: u32 = 3;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_ENUM: u32 = 6;
const KIND_TYPEDEF: u32 = 8;
const KIND_VOLATILE: u32 = 9;
const KIND_CONST: u32 = 10;
const KIND_RESTRICT: u32 = 11;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_VAR: u32 = 14;
const KIND_DATASEC: u32 = 15;
const KIND_DECL_TAG: u32 = 17;
const KIND_TYPE_TAG: u32 = 18;
const KIND_ENUM64: u32 = 19;

#[derive(Debug, Clone)]
struct Member {
    name: u32,
    ty: u32,
    bit_offset: u32,
    bitfield_size: u32,
}

#[derive(Debug, Clone)]
struct Type {
    name: u32,
    kind: u32,
    /// Size for INT/STRUCT/UNION/ENUM, referenced type for PTR/TYPEDEF/modifiers.
    size_or_type: u32,
    members: Vec<Member>,
    enum_values: Vec<(u32, i64)>,
    /// ARRAY: (element type, element count).
    array: Option<(u32, u32)>,
}

/// Where a member lives, in bytes from the start of the outer struct, and how big it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Field {
    pub offset: u32,
    pub size: u32,
}

pub(crate) struct Btf {
    /// Index 0 is the implicit `void`.
    types: Vec<Type>,
    strings: Vec<u8>,
    structs_by_name: HashMap<String, u32>,
}

impl Btf {
    pub(crate) fn from_sys_fs() -> Result<Self, BtfError> {
        Self::from_file(Path::new("/sys/kernel/btf/vmlinux"))
    }

    pub(crate) fn from_file(path: &Path) -> Result<Self, BtfError> {
        let data = std::fs::read(path).map_err(|source| BtfError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&data)
    }

    pub(crate) fn parse(data: &[u8]) -> Result<Self, BtfError> {
        let u16_at = |o: usize| data.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
        let u32_at = |o: usize| {
            data.get(o..o + 4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        };
        if u16_at(0) != Some(MAGIC) {
            return Err(BtfError::Format(
                "bad magic (big-endian BTF is not supported)",
            ));
        }
        let header = |i: usize| u32_at(4 + 4 * i).ok_or(BtfError::Format("short header"));
        let hdr_len = header(0)? as usize;
        let (type_off, type_len) = (header(1)? as usize, header(2)? as usize);
        let (str_off, str_len) = (header(3)? as usize, header(4)? as usize);
        let strings = data
            .get(hdr_len + str_off..hdr_len + str_off + str_len)
            .ok_or(BtfError::Format("string section out of bounds"))?
            .to_vec();
        let mut pos = hdr_len + type_off;
        let end = pos + type_len;
        if end > data.len() {
            return Err(BtfError::Format("type section out of bounds"));
        }
        let word = |pos: usize| u32_at(pos).ok_or(BtfError::Format("truncated type"));
        let mut types = vec![Type {
            name: 0,
            kind: 0,
            size_or_type: 0,
            members: Vec::new(),
            enum_values: Vec::new(),
            array: None,
        }];
        while pos < end {
            let name = word(pos)?;
            let info = word(pos + 4)?;
            let size_or_type = word(pos + 8)?;
            pos += 12;
            let vlen = (info & 0xffff) as usize;
            let kind = (info >> 24) & 0x1f;
            let kind_flag = info >> 31 == 1;
            let mut ty = Type {
                name,
                kind,
                size_or_type,
                members: Vec::new(),
                enum_values: Vec::new(),
                array: None,
            };
            match kind {
                KIND_INT | KIND_VAR | KIND_DECL_TAG => pos += 4,
                KIND_ARRAY => {
                    ty.array = Some((word(pos)?, word(pos + 8)?));
                    pos += 12;
                }
                KIND_STRUCT | KIND_UNION => {
                    for _ in 0..vlen {
                        let raw = word(pos + 8)?;
                        let (bit_offset, bitfield_size) = if kind_flag {
                            (raw & 0x00ff_ffff, raw >> 24)
                        } else {
                            (raw, 0)
                        };
                        ty.members.push(Member {
                            name: word(pos)?,
                            ty: word(pos + 4)?,
                            bit_offset,
                            bitfield_size,
                        });
                        pos += 12;
                    }
                }
                KIND_ENUM => {
                    for _ in 0..vlen {
                        ty.enum_values
                            .push((word(pos)?, i64::from(word(pos + 4)? as i32)));
                        pos += 8;
                    }
                }
                KIND_ENUM64 => {
                    for _ in 0..vlen {
                        let value = u64::from(word(pos + 4)?) | (u64::from(word(pos + 8)?) << 32);
                        ty.enum_values.push((word(pos)?, value as i64));
                        pos += 12;
                    }
                }
                KIND_FUNC_PROTO => pos += 8 * vlen,
                KIND_DATASEC => pos += 12 * vlen,
                // PTR, FWD, TYPEDEF, VOLATILE, CONST, RESTRICT, FUNC, FLOAT, TYPE_TAG.
                0..=19 => {}
                _ => return Err(BtfError::Format("unknown type kind")),
            }
            types.push(ty);
        }
        let mut btf = Self {
            types,
            strings,
            structs_by_name: HashMap::new(),
        };
        for (id, ty) in btf.types.iter().enumerate() {
            // Keep the first complete definition of each name.
            if ty.kind == KIND_STRUCT && ty.name != 0 {
                let name = btf.name(ty.name).to_owned();
                btf.structs_by_name.entry(name).or_insert(id as u32);
            }
        }
        Ok(btf)
    }

    fn name(&self, offset: u32) -> &str {
        let start = offset as usize;
        let tail = self.strings.get(start..).unwrap_or_default();
        let len = tail.iter().position(|&b| b == 0).unwrap_or(tail.len());
        std::str::from_utf8(&tail[..len]).unwrap_or("")
    }

    fn ty(&self, id: u32) -> Option<&Type> {
        self.types.get(id as usize)
    }

    /// Follows typedefs and qualifiers to the type they name.
    fn resolve(&self, mut id: u32) -> u32 {
        for _ in 0..32 {
            match self.ty(id) {
                Some(t)
                    if matches!(
                        t.kind,
                        KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG
                    ) =>
                {
                    id = t.size_or_type;
                }
                _ => break,
            }
        }
        id
    }

    fn size_of(&self, id: u32) -> u32 {
        let id = self.resolve(id);
        match self.ty(id) {
            Some(t) => match t.kind {
                KIND_PTR => 8,
                KIND_ARRAY => t.array.map(|(elem, n)| self.size_of(elem) * n).unwrap_or(0),
                _ => t.size_or_type,
            },
            None => 0,
        }
    }

    /// Finds `name` among the members of struct/union `id`, looking inside anonymous
    /// members too; returns (bit offset from `id`'s start, member).
    fn find_member(&self, id: u32, name: &str) -> Option<(u32, Member)> {
        let ty = self.ty(self.resolve(id))?;
        for m in &ty.members {
            if m.name != 0 && self.name(m.name) == name {
                return Some((m.bit_offset, m.clone()));
            }
        }
        for m in &ty.members {
            if m.name == 0
                && let Some((inner, found)) = self.find_member(m.ty, name)
            {
                return Some((m.bit_offset + inner, found));
            }
        }
        None
    }

    /// Byte offset and size of `path` (e.g. `["sk_backlog", "rmem_alloc"]`) inside
    /// struct `outer`.
    pub(crate) fn field(&self, outer: &str, path: &[&str]) -> Result<Field, BtfError> {
        let mut id = *self
            .structs_by_name
            .get(outer)
            .ok_or_else(|| BtfError::NoStruct(outer.to_owned()))?;
        let mut bits = 0u32;
        let mut size = 0u32;
        for step in path {
            let (offset, member) = self
                .find_member(id, step)
                .ok_or_else(|| BtfError::NoMember(outer.to_owned(), path.join(".")))?;
            if member.bitfield_size != 0 || offset % 8 != 0 {
                return Err(BtfError::Bitfield(outer.to_owned(), path.join(".")));
            }
            bits += offset;
            size = self.size_of(member.ty);
            id = member.ty;
        }
        Ok(Field {
            offset: bits / 8,
            size,
        })
    }

    /// Bit offset and width of the bitfield at the end of `path` inside struct `outer`
    /// (the steps before it must be whole members).
    pub(crate) fn bitfield(&self, outer: &str, path: &[&str]) -> Result<(u32, u32), BtfError> {
        let (last, inner) = path
            .split_last()
            .ok_or_else(|| BtfError::NoMember(outer.to_owned(), String::new()))?;
        let mut id = *self
            .structs_by_name
            .get(outer)
            .ok_or_else(|| BtfError::NoStruct(outer.to_owned()))?;
        let mut bits = 0u32;
        for step in inner {
            let (offset, member) = self
                .find_member(id, step)
                .ok_or_else(|| BtfError::NoMember(outer.to_owned(), path.join(".")))?;
            bits += offset;
            id = member.ty;
        }
        let (offset, member) = self
            .find_member(id, last)
            .ok_or_else(|| BtfError::NoMember(outer.to_owned(), path.join(".")))?;
        let width = if member.bitfield_size != 0 {
            member.bitfield_size
        } else {
            self.size_of(member.ty) * 8
        };
        Ok((bits + offset, width))
    }

    /// Value of enumerator `name` in any enum of the kernel.
    pub(crate) fn enum_value(&self, name: &str) -> Option<i64> {
        self.types
            .iter()
            .filter(|t| t.kind == KIND_ENUM || t.kind == KIND_ENUM64)
            .flat_map(|t| t.enum_values.iter())
            .find(|(n, _)| self.name(*n) == name)
            .map(|&(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds a BTF blob by hand: struct outer { int a; union { struct { short b; short c; }; }; };
    fn sample() -> Vec<u8> {
        let strings = b"\0int\0short\0outer\0a\0b\0c\0E\0V1\0".to_vec();
        let s = |name: &str| {
            let pos = strings
                .windows(name.len() + 1)
                .position(|w| &w[..name.len()] == name.as_bytes() && w[name.len()] == 0)
                .unwrap();
            pos as u32
        };
        let mut t = Vec::new();
        let mut push = |words: &[u32]| {
            words
                .iter()
                .for_each(|w| t.extend_from_slice(&w.to_le_bytes()))
        };
        // 1: int (4 bytes)
        push(&[s("int"), KIND_INT << 24, 4, 32]);
        // 2: short
        push(&[s("short"), KIND_INT << 24, 2, 16]);
        // 3: anonymous struct { short b; short c; }
        push(&[0, (KIND_STRUCT << 24) | 2, 4]);
        push(&[s("b"), 2, 0]);
        push(&[s("c"), 2, 16]);
        // 4: anonymous union { struct 3 }
        push(&[0, (KIND_UNION << 24) | 1, 4]);
        push(&[0, 3, 0]);
        // 5: struct outer { int a; union 4; }
        push(&[s("outer"), (KIND_STRUCT << 24) | 2, 8]);
        push(&[s("a"), 1, 0]);
        push(&[0, 4, 32]);
        // 6: enum E { V1 = 40 }
        push(&[s("E"), (KIND_ENUM << 24) | 1, 4]);
        push(&[s("V1"), 40]);
        let mut blob = Vec::new();
        let hdr = [
            24u32,
            0,
            t.len() as u32,
            t.len() as u32,
            strings.len() as u32,
        ];
        blob.extend_from_slice(&MAGIC.to_le_bytes());
        blob.extend_from_slice(&[1, 0]);
        hdr.iter()
            .for_each(|w| blob.extend_from_slice(&w.to_le_bytes()));
        blob.extend_from_slice(&t);
        blob.extend_from_slice(&strings);
        blob
    }

    #[test]
    fn finds_members_through_anonymous_unions() {
        let btf = Btf::parse(&sample()).unwrap();
        assert_eq!(
            btf.field("outer", &["a"]).unwrap(),
            Field { offset: 0, size: 4 }
        );
        assert_eq!(
            btf.field("outer", &["b"]).unwrap(),
            Field { offset: 4, size: 2 }
        );
        assert_eq!(
            btf.field("outer", &["c"]).unwrap(),
            Field { offset: 6, size: 2 }
        );
        assert!(matches!(
            btf.field("outer", &["zz"]),
            Err(BtfError::NoMember(..))
        ));
        assert!(matches!(
            btf.field("nope", &["a"]),
            Err(BtfError::NoStruct(..))
        ));
        assert_eq!(btf.enum_value("V1"), Some(40));
    }

    #[test]
    fn rejects_garbage() {
        assert!(Btf::parse(b"not btf").is_err());
        let mut truncated = sample();
        truncated.truncate(40);
        assert!(Btf::parse(&truncated).is_err());
    }

    #[test]
    fn reads_this_kernels_struct_sock() {
        let Ok(btf) = Btf::from_sys_fs() else {
            eprintln!("SKIP: /sys/kernel/btf/vmlinux not readable");
            return;
        };
        let state = btf.field("sock_common", &["skc_state"]).unwrap();
        assert_eq!(state.size, 1);
        assert_eq!(btf.field("sock_common", &["skc_num"]).unwrap().size, 2);
        assert!(
            btf.enum_value("SKB_DROP_REASON_TCP_LISTEN_OVERFLOW")
                .is_some()
        );
    }
}
